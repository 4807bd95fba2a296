// Plain data the GUI shows for one trace, computed off the GUI thread by the loader from
// profiler/analysis (so the GUI and `tidemark summary`/`diagnose` give the same answers).
// Models get copies of these rows through their setData(); nothing here touches Qt widgets.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/details.h"
#include "profiler/analysis/diagnose.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"

namespace tidemark::gui {

// An open trace shared by the loader, the timeline's zoom queries and the allocator view.
// analysis::Trace caches sites and holds one SQLite connection, so every use goes through
// with(), which serialises callers from any thread.
class TraceSession {
 public:
  explicit TraceSession(analysis::Trace trace) : trace_(std::move(trace)) {}
  template <class F>
  auto with(F&& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return f(trace_);
  }

 private:
  mutable std::mutex mutex_;
  analysis::Trace trace_;
};

// A group of allocations (by site) with the time span its allocations cover, so selecting
// it in a table can highlight that span on the timeline. Times are absolute.
struct SiteRow {
  std::string device;
  std::string site;
  int64_t bytes = 0, requested_bytes = 0;
  uint64_t count = 0;
  uint64_t first_ts = 0, last_ts = 0;
  // The site's largest allocation in the group (its Details): device id, addr, alloc_ts.
  int64_t device_id = 0;
  uint64_t largest_addr = 0, largest_alloc_ts = 0;
};

// One sync (a wait on the device): ts is when it ended (absolute), as in the syncs table.
struct SyncEvent {
  uint64_t ts = 0, duration_ns = 0;
  std::string kind, site;
  uint64_t stack_id = 0;
};

struct SyncSiteRow {
  analysis::SyncSite site;
  uint64_t first_ts = 0, last_ts = 0;
};

struct StepRow {
  std::string device;
  analysis::StepStats stats;  // start_ns relative to the origin
};

// The loader fills a TraceData in stages and hands out a snapshot after each, so the timeline
// paints before the slower tables and findings exist (docs/gui.md, "Loading").
enum class Stage {
  opened,    // session, origin, end, devices, peaks: enough for the timeline
  tables,    // + summary, live at peak, leaks, syncs, steps, scopes
  complete,  // + the findings of diagnose()
};

struct TraceData {
  Stage stage = Stage::opened;
  std::string late_error;  // a failure after the trace opened (tables or findings)
  std::string path;
  std::shared_ptr<TraceSession> session;
  uint64_t origin_ns = 0, end_ns = 0;
  std::vector<analysis::DeviceRef> devices;
  analysis::Summary summary;
  analysis::Diagnosis diagnosis;
  std::vector<analysis::DeviceSummary> device_summaries;
  // Per device (same order as `devices`): the allocated peak, if the device has memory events.
  std::vector<std::optional<store::Peak>> peaks;
  std::vector<std::pair<int64_t, uint64_t>> steps;  // (number, absolute ts)
  std::vector<SiteRow> live_at_peak, leaks;
  std::vector<SyncEvent> sync_events;  // by ts
  std::vector<SyncSiteRow> sync_sites;
  std::vector<StepRow> step_rows;
  std::vector<analysis::ScopeSpan> scopes;  // by push_ts
  int scope_depth = 0;                      // rows the scope lane needs (max depth + 1)
};

// The stages, each on its own: open_trace_data() opens the trace (the session the timeline's
// queries use); compute_tables() and compute_findings() read through `trace`, a second
// connection of the loader's own, so the timeline's zoom queries never wait behind them.
std::shared_ptr<TraceData> open_trace_data(const std::string& path);
void compute_tables(TraceData& data, const analysis::Trace& trace,
                    const std::function<void(int, const std::string&)>& progress = {});
void compute_findings(TraceData& data, const analysis::Trace& trace);

// Reads everything the views need (all stages). `progress(percent, what)` is called between stages.
// Throws (store::StoreError, std::exception) on an unreadable trace.
std::shared_ptr<const TraceData> load_trace_data(
    const std::string& path, const std::function<void(int, const std::string&)>& progress = {});

// Individual syncs (not exposed by profiler/analysis: see docs/gui.md).
std::vector<SyncEvent> sync_events(const analysis::Trace& trace);

// The allocator's state at a time on one device: its segments (reserved ranges) and the
// blocks carved from them. A block is allocated (handed out), pending (freed by the caller,
// but another stream may still use it) or implicitly cached free (a gap inside a segment).
struct BlockState {
  uint64_t addr = 0, size = 0, requested = 0;
  uint64_t alloc_ts = 0;  // with the device and addr, finds its allocation (Details)
  bool pending_free = false;
  std::string site, category, scope;
};
struct SegmentState {
  uint64_t addr = 0, size = 0;
  std::string pool;
  std::vector<BlockState> blocks;  // by addr
};
struct AllocatorState {
  uint64_t ts = 0;       // absolute
  uint64_t time_ns = 0;  // relative to the origin
  std::string device;
  int64_t device_id = 0;
  std::vector<SegmentState> segments;  // by addr
};
AllocatorState allocator_state(const analysis::Trace& trace, int64_t device, uint64_t ts);

// The details of the allocation at `addr` on `device` allocated at `alloc_ts` (absolute).
std::optional<analysis::AllocationDetails> find_allocation_details(const analysis::Trace& trace,
                                                                   int64_t device, uint64_t addr,
                                                                   uint64_t alloc_ts);

}  // namespace tidemark::gui
