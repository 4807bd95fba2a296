// The caching allocator's state at one time on one device, from the derived tables segments
// and allocations (docs/trace-format.md): what PyTorch's "Allocator State History" draws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

// A block carved from a segment and not yet reusable at the time: allocated (handed to a
// caller) or pending free (the caller freed it, another stream may still use it: between
// free_requested and free_completed). Cached free memory is the gaps between blocks.
struct BlockState {
  uint64_t addr = 0, size = 0, requested = 0;  // size - requested: lost to rounding
  uint64_t alloc_ts = 0;                       // absolute
  uint64_t seq = 0;                            // of the alloc (allocation_details(trace, seq))
  uint64_t stream = 0, stack_id = 0;
  bool pending_free = false;
  std::string site, category, scope;  // site: Note [Allocation site] label
};
// A reserved segment (or mapped range of an expandable segment) and its blocks, by address.
struct SegmentState {
  uint64_t addr = 0, size = 0;
  std::string pool;  // "small" / "large"
  std::string kind;  // "segment" / "mapped"
  uint64_t stream = 0;
  std::vector<BlockState> blocks;
  uint64_t allocated_bytes() const;  // blocks not pending free
  uint64_t pending_bytes() const;
  uint64_t cached_bytes() const { return size - allocated_bytes() - pending_bytes(); }
};
struct AllocatorState {
  uint64_t ts = 0;       // absolute
  uint64_t time_ns = 0;  // relative to the origin
  std::string device;
  int64_t device_id = 0;
  std::vector<SegmentState> segments;  // by address
};
// Segments reserved at `ts` (absolute: alloc_ts <= ts < free_ts) on `device`, each with the
// blocks allocated at or before `ts` whose free has not completed by then. A block outside
// every segment (events lost) is left out.
AllocatorState allocator_state(const Trace& trace, int64_t device, uint64_t ts);

}  // namespace tidemark::analysis
