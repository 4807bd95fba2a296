// Memory questions: peaks, what was live at a time grouped by site/stack/scope/category,
// leaks, the per-device summary, and timelines from the level-of-detail tables.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

// `line`: by source line (Note [Source lines] in memory.cpp; Trace::set_source_file).
enum class GroupBy { site, stack, scope, category, line };
std::string_view group_by_name(GroupBy g);
std::optional<GroupBy> parse_group_by(std::string_view s);

// Allocations sharing a key: a site, a stack, a scope path or a category.
struct Group {
  std::string key;
  std::string label;
  int64_t bytes = 0;  // sum of the allocations' (rounded) sizes
  int64_t requested_bytes = 0;
  uint64_t count = 0;
  std::vector<std::string> frames;  // GroupBy::stack only: the stack, innermost first
  std::vector<bool> library;        // ... and per frame, whether it is library code
};

// A point in time: every allocation with alloc seq <= `seq` (when set) or alloc_ts <= `ts`,
// not yet free_requested at `ts` (allocated bytes, as PyTorch's statistics).
struct TimePoint {
  uint64_t ts = 0;              // absolute event-clock time
  std::optional<uint64_t> seq;  // the event at the point (a peak's)
};

// What was live at a time on a device, grouped: allocations (live_at), or reserved memory
// (reserved_at_peak: segments and mapped ranges).
struct LiveBreakdown {
  int64_t device_id = 0;
  std::string device;
  uint64_t time_ns = 0;  // relative to the origin
  int64_t bytes = 0;     // total live bytes
  uint64_t count = 0;    // live allocations (or segments and mapped ranges)
  GroupBy by = GroupBy::site;
  std::vector<Group> groups;  // largest first, at most `limit`
  uint64_t groups_total = 0;  // before the limit
};

// Allocations live at `at` on a device.
std::vector<store::AllocationRow> live_allocations(const Trace& trace, int64_t device,
                                                   TimePoint at);
// Allocations allocated at some time in [from_ts, to_ts) (absolute) on a device: alloc_ts <
// to_ts and not free_requested by from_ts (free_requested_ts > from_ts, or never), by seq.
std::vector<store::AllocationRow> live_in_range(const Trace& trace, int64_t device,
                                                uint64_t from_ts, uint64_t to_ts);
// Groups allocations (largest bytes first, ties by key), keeping at most `limit` (0: all).
std::vector<Group> group_allocations(const Trace& trace,
                                     const std::vector<store::AllocationRow>& rows, GroupBy by,
                                     size_t limit, uint64_t* groups_total = nullptr);
LiveBreakdown live_at(const Trace& trace, int64_t device, TimePoint at, GroupBy by, size_t limit);

// Rows of `segments` reserved at `at` on a device (alloc seq <= `seq` when set, else alloc_ts
// <= `ts`; not freed or unmapped at `ts`), by seq. A mapped range partly unmapped later is
// several rows of one seq.
std::vector<store::SegmentRow> live_segments(const Trace& trace, int64_t device, TimePoint at);
// Where reserved memory came from: the segments and mapped ranges live at the reserved peak of
// a device, grouped by the site of their segment_alloc / segment_map's stack (GroupBy::site,
// the grouping live_at uses; for a tensorlib trace that stack is the allocation that made the
// cache grow, for a CUDA program the cudaMalloc / cuMemMap call). `count` and each group's
// `count` are segment_alloc / segment_map events (a partly unmapped range counts once);
// `requested_bytes` is 0. Empty when the device has no reserved memory.
// `by` GroupBy::stack groups by the whole stack instead (a flame graph of reserved memory).
std::optional<LiveBreakdown> reserved_at_peak(const Trace& trace, int64_t device, size_t limit,
                                              GroupBy by = GroupBy::site);

// The peak of a curve: TraceReader::peak (first time the highest value was reached).
std::optional<store::Peak> peak(const Trace& trace, int64_t device,
                                store::Curve curve = store::Curve::allocated);
// The time point of the allocated peak; empty when the device has no memory events.
std::optional<TimePoint> peak_point(const Trace& trace, int64_t device);
// The device a command shows when none is named: the one with the highest allocated peak (the
// first of those); null for a trace without devices.
const DeviceRef* busiest_device(const Trace& trace);
// The start of step `number` (its step event's time); throws std::invalid_argument when absent.
TimePoint step_point(const Trace& trace, int64_t number);

// Leaks: allocations still allocated (not free_requested) at the end of the trace.
struct StepLeak {
  std::optional<int64_t> step;  // the step the leaked allocations were made in; empty: before
  int64_t bytes = 0;
  uint64_t count = 0;
};
struct LeakReport {
  int64_t bytes = 0;
  uint64_t count = 0;
  GroupBy by = GroupBy::site;
  std::vector<Group> groups;
  uint64_t groups_total = 0;
  std::vector<StepLeak> by_step;  // in step order
};
// All devices when `device` is empty.
LeakReport leaks(const Trace& trace, std::optional<int64_t> device, GroupBy by, size_t limit);

// A private memory pool (a CUDA graph's, a torch.cuda.MemPool's) of an imported snapshot: its
// segments and reserved bytes when the snapshot was taken (meta `private_pools`; Note [Private
// pools] in profiler/importers/pytorch_snapshot.cpp).
struct PrivatePoolSummary {
  int64_t pool_a = 0, pool_b = 0;  // segment_pool_id
  uint64_t segments = 0;
  int64_t reserved_bytes = 0;
};

struct DeviceSummary {
  int64_t device_id = 0;
  std::string device;       // "cpu", "cuda:0"
  std::string description;  // the recorded name
  uint64_t capacity = 0;
  int64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0, peak_active_bytes = 0,
          peak_requested_bytes = 0;
  uint64_t peak_allocated_time_ns = 0;  // relative to the origin
  // Note [Estimated block sizes]: in an imported snapshot, the blocks live at the allocated
  // peak whose size is PyTorch's default rounding of the request rather than known (0: the peak
  // is exact, as it always is in a recorded trace).
  uint64_t peak_allocated_estimated_blocks = 0;
  int64_t final_allocated_bytes = 0, final_reserved_bytes = 0, final_active_bytes = 0;
  uint64_t alloc_count = 0;
  uint64_t segment_alloc_count = 0;  // segment_alloc and segment_map events
  uint64_t oom_count = 0;
  uint64_t sync_count = 0;
  uint64_t leaked_count = 0;
  int64_t leaked_bytes = 0;
  // Reserved memory of private pools (an imported snapshot's; empty otherwise), by pool. Part
  // of the reserved bytes above, which count every pool.
  std::vector<PrivatePoolSummary> private_pools;
};

struct Summary {
  std::string path;
  int schema_version = 0;
  std::string tool_version, command_line, host;
  int64_t pid = 0;
  bool clean_end = false;
  uint64_t origin_ts = 0;  // absolute time of the origin
  uint64_t duration_ns = 0;
  uint64_t event_count = 0, dropped_count = 0;
  // dropped_count is every event lost (Note [Counted losses] in profiler/store/trace_writer.h).
  bool loss_counted = true;
  uint64_t step_count = 0;
  // An imported PyTorch snapshot: what is live at its end was live when the snapshot was
  // taken, not leaked; synthetic_times: its times are entry order (Trace::synthetic_times).
  bool imported_snapshot = false, synthetic_times = false;
  std::vector<DeviceSummary> devices;
  // On the selected device, else the one with the highest allocated peak.
  std::optional<LiveBreakdown> top_at_peak;
  // The same peak by category (parameter, activation, ...), every category; empty when the
  // trace has no categories (every allocation `unknown`).
  std::optional<LiveBreakdown> categories_at_peak;
  // What the categories were inferred from (Trace::categories_inferred); empty: recorded.
  std::string categories_inferred;
  // How `tidemark estimate` made the trace (Trace::estimated, JSON); empty: a GPU ran it.
  std::string estimated;
  // On the selected device, else the one with the highest reserved peak.
  std::optional<LiveBreakdown> reserved_at_peak;
  LeakReport leaks;
};

// The one line every view of an estimated trace shows (Trace::estimated, JSON): "estimated, no
// GPU ran: tidemark estimate as NVIDIA A100-SXM4-80GB (79.3 GiB), torch 2.15.0"; empty for a
// trace a GPU ran.
std::string estimate_label(const std::string& estimated);

struct SummaryOptions {
  std::optional<int64_t> device;  // only this device
  size_t top_limit = 10;
};
DeviceSummary summarize_device(const Trace& trace, const DeviceRef& device);
Summary summarize(const Trace& trace, const SummaryOptions& options = {});

// A timeline: `width` columns over [from, to) (absolute times), each with the min, max and
// last value of every curve. Built from the coarsest level-of-detail level whose bucket width
// is at most (to - from) / width, so a bucket never spans more than one column.
struct CurveColumns {
  std::vector<int64_t> min, max, last;
};
struct Timeline {
  int64_t device_id = 0;
  std::string device;
  uint64_t from_ts = 0, to_ts = 0;  // absolute
  uint64_t column_ns = 0;           // (to - from) / width, at least 1
  int level = 0;
  uint64_t level_width_ns = 0;
  CurveColumns allocated, active, reserved, requested;
  std::optional<store::Peak> peak_allocated;        // the highest allocated value in the range
  std::vector<std::pair<int64_t, uint64_t>> steps;  // (number, absolute ts) in the range
  size_t width() const { return allocated.max.size(); }
};
struct TimelineRequest {
  std::optional<uint64_t> from_ts, to_ts;  // absolute; default: the whole trace
  size_t width = 80;
  // Only the curves: leave Timeline::steps and peak_allocated empty (a viewer that zooms and
  // pans keeps the steps and the peaks it read once; see step_starts()).
  bool curves_only = false;
};
Timeline timeline(const Trace& trace, int64_t device, const TimelineRequest& request);

// timeline() for a viewer that zooms and pans: remembers, per device, the level-of-detail
// rows it read (one level, about the span of a few views), so the next request at the same
// level reads only the rows that came into view -- none when zooming in. Use one cache with
// one trace, from one thread at a time.
class TimelineCache {
 public:
  TimelineCache();
  ~TimelineCache();
  TimelineCache(TimelineCache&&) noexcept;
  TimelineCache& operator=(TimelineCache&&) noexcept;
  Timeline timeline(const Trace& trace, int64_t device, const TimelineRequest& request);
  // Rows read from the trace so far (for tests and benchmarks).
  uint64_t rows_read() const { return rows_read_; }

 private:
  struct Entry;
  std::map<int64_t, Entry> entries_;
  uint64_t rows_read_ = 0;
};

// Every step event as (number, absolute ts), by time; empty when the trace has no steps table.
std::vector<std::pair<int64_t, uint64_t>> step_starts(const Trace& trace);

// Tensors and views alive at `ts` (absolute), by creation time.
std::vector<TensorRecord> tensors_live_at(const Trace& trace, uint64_t ts);

}  // namespace tidemark::analysis
