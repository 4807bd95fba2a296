// What the caching allocator held at a moment, from the `segments` and `allocations` tables
// finalize builds: the reserved ranges and the blocks in them, by address. The allocator
// state a viewer draws and the fragmentation the diagnoses measure both start here, so the
// rule of which rows are live at `ts` is written once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "profiler/store/trace_reader.h"

namespace tidemark::store {

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

}  // namespace tidemark::store
