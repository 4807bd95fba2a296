// Per-step statistics, growth of live memory across steps, and where the program waited on
// the device (syncs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

// Note [Steps of a rank]: a merged trace holds every rank's steps, and each rank steps on its
// own (its steps end at its own next step: the `steps` table, docs/trace-format.md). What is
// said of one device's steps uses its rank's: the step statistics and growth of a device, the
// steps of its timeline, the step its leaks were made in. A step: its number, its start and its
// end (absolute; none for the last).
struct StepSpan {
  int64_t number = 0;
  uint64_t ts = 0;
  std::optional<uint64_t> end_ts;
  uint64_t seq = 0;  // the step event's: what came before it at its own time is before it
};
// The steps of `device`, in time order: its rank's in a merged trace, else every step (also
// with no device).
std::vector<StepSpan> steps_of(const Trace& trace, std::optional<int64_t> device);

// One step: from its step event to the next one (the last step ends with the trace).
struct StepStats {
  int64_t number = 0;
  uint64_t start_ns = 0;  // relative to the origin
  uint64_t duration_ns = 0;
  // Live (allocated) bytes when the step began: after the events before it, its own time's
  // included (a snapshot's window starts with its earlier blocks at the step's time).
  int64_t allocated_at_start_bytes = 0;
  int64_t peak_allocated_bytes = 0;  // highest allocated value during the step
  int64_t peak_reserved_bytes = 0;
  uint64_t alloc_count = 0;
  int64_t alloc_bytes = 0;
  uint64_t sync_count = 0;  // syncs on any device
  uint64_t sync_ns = 0;     // time spent waiting
};
std::vector<StepStats> step_stats(const Trace& trace, int64_t device);
// What a trace's steps were inferred from (an imported snapshot's annotation, Note [Inferred
// steps] in the importer: "Optimizer.zero_grad#AdamW.zero_grad"); empty when they were
// recorded (or there are none).
std::optional<std::string> steps_inferred_from(const Trace& trace);

// Live bytes at each step boundary, and a least-squares line through them. Note [Growth]:
// the first boundary is skipped as warm-up (parameters, optimizer state and caches appear in
// the first step); `growing` needs at least 4 remaining boundaries, a positive slope, a fit
// with r² >= 0.8 and a total rise of at least 4 KiB between the first and last of them.
struct Growth {
  std::vector<std::pair<int64_t, int64_t>> boundaries;  // (step number, allocated bytes)
  double slope_bytes_per_step = 0;
  double r2 = 0;
  bool growing = false;
};
Growth growth(const Trace& trace, int64_t device);
Growth fit_growth(std::vector<std::pair<int64_t, int64_t>> boundaries);

struct SyncSite {
  std::string key, label;
  std::string kind;  // the most frequent sync kind at the site
  uint64_t count = 0;
  uint64_t total_ns = 0, max_ns = 0;
};
struct SyncReport {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  std::vector<std::pair<std::string, uint64_t>> by_kind;  // kind -> count, most frequent first
  std::vector<SyncSite> sites;                            // most frequent first
  uint64_t sites_total = 0;
  uint64_t max_per_step = 0;
  std::optional<int64_t> max_step;  // the step with the most syncs
};
SyncReport syncs(const Trace& trace, size_t limit);

// One sync of the `syncs` table: the host waited `duration_ns` for the device, until `ts`.
struct SyncEvent {
  uint64_t ts = 0;  // absolute: when the wait ended (it began duration_ns earlier)
  uint64_t duration_ns = 0;
  uint64_t seq = 0;
  int64_t device_id = 0;
  std::string kind;  // a SyncKind name: device, stream, event, item, copy_to_host, ...
  uint64_t stream = 0, thread = 0;
  uint64_t stack_id = 0;  // 0: no stack; Trace::stack_frames() gives the frames
  std::string site;       // Note [Allocation site] label of the stack
  std::string site_key;   // and its key: SyncSite::key of the site the sync counts under
};
// Every sync that ended in [from_ts, to_ts] (absolute), by time then seq. Empty when the trace
// has no syncs table.
std::vector<SyncEvent> sync_events(const Trace& trace, uint64_t from_ts, uint64_t to_ts);

}  // namespace tidemark::analysis
