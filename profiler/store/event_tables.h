// Rows of the tables finalize builds from the events that are not memory: steps, scopes,
// syncs, marks, memcpys and allocator decisions (docs/trace-format.md). The analysis library
// reads them through these functions, so their SQL and how their columns decode stay in the
// store. Each calls `fn` once per row in the order it names; a row is valid during the call.
// A trace not finalized has no such rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/store/trace_reader.h"

namespace tidemark::store {

// A step of `steps`: from its event to the next step's (the last one has no end).
struct StepRow {
  int64_t number = 0;
  uint64_t ts = 0;
  std::optional<uint64_t> end_ts;
  uint64_t seq = 0, thread = 0;
  std::string name;  // the step event's name ("" when none)
};
// By ts, then seq.
void for_each_step(const TraceReader& reader, const std::function<void(const StepRow&)>& fn);

// A scope of `scopes` (module path, NVTX range, user scope).
struct ScopeRow {
  uint64_t thread = 0;
  std::string name, path;  // "" when none
  int64_t depth = 0, value = 0;
  uint64_t push_ts = 0;
  std::optional<uint64_t> pop_ts;  // empty: still open at the end
};
// By thread, then push time and order.
void for_each_scope(const TraceReader& reader, const std::function<void(const ScopeRow&)>& fn);
// The scopes open at some time in [from_ts, to_ts], by push time and order.
std::vector<ScopeRow> scopes_overlapping(const TraceReader& reader, uint64_t from_ts,
                                         uint64_t to_ts);
// The scopes with one of `names` ("backward", ...), by push time and order.
std::vector<ScopeRow> scopes_named(const TraceReader& reader,
                                   const std::vector<std::string>& names);

// A host wait of `syncs`.
struct SyncRow {
  uint64_t ts = 0, seq = 0;
  int64_t device = 0;
  std::string kind;  // events::sync_kind_name
  uint64_t duration_ns = 0, stream = 0, thread = 0, stack_id = 0;
};
// The syncs with ts in [from_ts, to_ts], by ts, then seq.
void for_each_sync(const TraceReader& reader, const std::function<void(const SyncRow&)>& fn,
                   uint64_t from_ts = 0, uint64_t to_ts = UINT64_MAX);

// A user annotation of `marks`.
struct MarkRow {
  uint64_t ts = 0;
  int64_t device = 0;
  std::string name;  // "" when none
  uint64_t value = 0, thread = 0;
};
// By ts, then seq.
// The syncs of `device`.
uint64_t sync_count(const TraceReader& reader, int64_t device);

void for_each_mark(const TraceReader& reader, const std::function<void(const MarkRow&)>& fn);

// A host<->device copy of `memcpys`.
struct MemcpyRow {
  uint64_t ts = 0;
  int64_t device = 0;
  std::string direction;  // "host_to_device", ...
  uint64_t bytes = 0, stream = 0, thread = 0;
  bool pinned = false, async = false;
};
// By ts, then seq.
void for_each_memcpy(const TraceReader& reader, const std::function<void(const MemcpyRow&)>& fn);

// An allocator decision of `allocator_events` (empty_cache, alloc_retry, oom).
struct AllocatorEventRow {
  uint64_t ts = 0, seq = 0;
  int64_t device = 0;
  std::string kind;
  uint64_t requested_size = 0, stream = 0, device_free = 0, device_total = 0;
  uint64_t allocated = 0, reserved = 0, released = 0;
  uint64_t thread = 0, stack_id = 0;
};
// By ts, then seq.
void for_each_allocator_event(const TraceReader& reader,
                              const std::function<void(const AllocatorEventRow&)>& fn);
// The decisions of one kind ("oom", "alloc_retry", "empty_cache"), of one device when
// `device` is set, by ts, then seq.
std::vector<AllocatorEventRow> allocator_events(const TraceReader& reader, std::string_view kind,
                                                std::optional<int64_t> device = std::nullopt);

// How many rows of a window [t0, t1), and their total: a device's allocations by allocation
// time (bytes), syncs by time (nanoseconds waited), those of one rank of a merged trace when
// `rank` is set (Note [Merged devices] in profiler/analysis/merge.h). Prepared once, asked
// for many windows.
class WindowTotals {
 public:
  explicit WindowTotals(const TraceReader& reader);
  ~WindowTotals();
  WindowTotals(const WindowTotals&) = delete;
  WindowTotals& operator=(const WindowTotals&) = delete;
  struct Total {
    uint64_t count = 0, sum = 0;
  };
  Total allocations(int64_t device, uint64_t t0, uint64_t t1);
  Total syncs(uint64_t t0, uint64_t t1, std::optional<int64_t> rank);

 private:
  struct Queries;
  std::unique_ptr<Queries> q_;
};

// Every thread with raw events or scopes, ascending.
std::vector<uint64_t> threads(const TraceReader& reader);

}  // namespace tidemark::store
