// What the caching allocator held at a moment, from the `segments` and `allocations` tables
// finalize builds: the reserved ranges and the blocks in them, by address. The allocator
// state a viewer draws and the fragmentation the diagnoses measure both start here, so the
// rule of which rows are live at `ts` is written once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "profiler/store/trace_reader.h"

namespace tidemark::store {

namespace detail {
class Stmt;
}  // namespace detail

// A pool as the tables name it: "small" or "large".
constexpr const char* pool_name(events::Pool p) {
  return p == events::Pool::small ? "small" : "large";
}

// The segments (and mapped ranges of expandable segments) reserved at `ts` (reserved at or
// before it and not yet released), of one pool when `pool` is set, by address.
std::vector<SegmentRow> segments_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                    std::optional<events::Pool> pool = std::nullopt);
// The blocks not yet reusable at `ts` (allocated at or before it, not free_completed by it:
// allocated, or released while a stream still used them), by address.
std::vector<AllocationRow> blocks_active_at(const TraceReader& reader, int64_t device, uint64_t ts);

// ---- queries of `allocations` and `segments` -----------------------------------------------
// What analysis asks of the two tables besides the state at a moment: whether rows exist, how
// many and how large, and the rows one at a time in an order. A filter names the rows; its
// fields combine with AND, and a default filter takes every row.

struct AllocationFilter {
  std::optional<int64_t> device;
  std::optional<uint64_t> addr;                  // at this address
  std::optional<uint64_t> alloc_ts;              // allocated at this time
  std::optional<events::Category> category;      // of this category only
  bool categorized = false;                      // of a category other than unknown
  std::vector<events::Category> not_categories;  // of none of these
  bool with_stack = false;                       // with a recorded stack (stack id not 0)
  bool never_freed = false;                      // never free_requested (leaked at the end)
  std::optional<uint64_t> live_at;  // allocated at or before it, not free_requested by it
  // Live at some time of [first, second): allocated before `second`, not free_requested by
  // `first`.
  std::optional<std::pair<uint64_t, uint64_t>> live_in;
  bool free_completed = false;        // with a recorded free_completed time
  std::optional<uint64_t> seq;        // the allocation of this sequence number
  std::optional<uint64_t> after_seq;  // allocated after this sequence number
};

enum class AllocationOrder { none, seq, alloc_ts_then_seq };

// The columns of an allocation that the passes over many rows need, without its strings (the
// scope) or its address: a long run has millions of rows, read one at a time.
struct AllocationSpan {
  uint64_t seq = 0, alloc_ts = 0;
  std::optional<uint64_t> free_requested_ts, free_completed_ts;  // empty: not freed
  uint64_t size = 0, stack_id = 0, thread = 0;
  uint64_t requested_size = 0;  // what was asked for (0 in traces that do not say)
  events::Category category = events::Category::unknown;
};

struct RowTotals {
  uint64_t rows = 0;
  int64_t bytes = 0;  // the rows' sizes summed
};

bool any_allocation(const TraceReader& reader, const AllocationFilter& filter = {});
// The rows' count alone: an index answers it without reading the rows, where the sizes
// (allocation_totals) need each row.
uint64_t allocation_count(const TraceReader& reader, const AllocationFilter& filter = {});
RowTotals allocation_totals(const TraceReader& reader, const AllocationFilter& filter = {});
// The number of streams that allocated on `device`.
uint64_t allocation_streams(const TraceReader& reader, int64_t device);
// The earliest and the latest allocation time on `device`; empty when it has no allocation.
std::optional<std::pair<uint64_t, uint64_t>> allocation_time_range(const TraceReader& reader,
                                                                   int64_t device);
// The rows `filter` takes in `order`, read as they are asked for: a pass that walks the
// allocations beside another table (the memory curve) holds one row at a time.
class AllocationCursor {
 public:
  AllocationCursor(const TraceReader& reader, const AllocationFilter& filter,
                   AllocationOrder order);
  ~AllocationCursor();
  AllocationCursor(const AllocationCursor&) = delete;
  AllocationCursor& operator=(const AllocationCursor&) = delete;
  // The next row, or empty after the last.
  std::optional<AllocationSpan> next();

 private:
  const TraceReader& reader_;
  std::unique_ptr<detail::Stmt> q_;
  bool done_ = false;
};

// The rows `filter` takes in `order`, one at a time; the first only with first_allocation.
void for_each_allocation(const TraceReader& reader, const AllocationFilter& filter,
                         AllocationOrder order,
                         const std::function<void(const AllocationSpan&)>& fn);
std::optional<AllocationSpan> first_allocation(const TraceReader& reader,
                                               const AllocationFilter& filter,
                                               AllocationOrder order);
// The rows `filter` takes in `order`, every column (the scope's text included): all at once,
// or one at a time.
std::vector<AllocationRow> allocation_rows(const TraceReader& reader,
                                           const AllocationFilter& filter, AllocationOrder order);
void for_each_allocation_row(const TraceReader& reader, const AllocationFilter& filter,
                             AllocationOrder order,
                             const std::function<void(const AllocationRow&)>& fn);

// The block of `device` that held `addr` at `ts` (allocated at or before it, freed at or after
// it): the latest allocated, when the address was handed out more than once.
std::optional<AllocationRow> allocation_holding(const TraceReader& reader, int64_t device,
                                                uint64_t addr, uint64_t ts);

// The allocations (allocated_at: not yet free_requested) or the segments (reserved_at: not yet
// released) of `device` live at `ts`, by sequence number. With `seq`, an event's sequence
// number decides what came before it (two events may share a time), and the time bounds the
// scan, allowing for cores whose clocks disagree by a little (1 ms).
std::vector<AllocationRow> allocated_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                        std::optional<uint64_t> seq = std::nullopt);
std::vector<SegmentRow> reserved_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                    std::optional<uint64_t> seq = std::nullopt);

struct SegmentFilter {
  std::optional<int64_t> device;
  bool freed = false;        // released before the end (a free_ts)
  bool mapped_only = false;  // pieces of expandable segments' mapped ranges
};

bool any_segment(const TraceReader& reader, const SegmentFilter& filter = {});
uint64_t segment_count(const TraceReader& reader, const SegmentFilter& filter = {});
RowTotals segment_totals(const TraceReader& reader, const SegmentFilter& filter = {});
// The reservations among the rows (a segment_alloc or segment_map each: the distinct sequence
// numbers, as the pieces of one mapped range share theirs).
uint64_t segment_reservations(const TraceReader& reader, const SegmentFilter& filter = {});
// The rows `filter` takes, by sequence number then address.
std::vector<SegmentRow> segments_matching(const TraceReader& reader, const SegmentFilter& filter);

}  // namespace tidemark::store
