// The caching allocator's bookkeeping types: blocks, segments, the pools' ordering and a
// request's parameters (internal to tensorlib/memory/caching_allocator.cpp, which states the
// policy they serve).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include "profiler/events/events.h"
#include "tensorlib/memory/device_interface.h"

namespace tl::memory::allocator_detail {

inline size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}
inline size_t align_down(size_t n, size_t a) {
  return n / a * a;
}

struct Segment;

struct Block {
  uintptr_t addr = 0;
  size_t size = 0;
  size_t requested_size = 0;  // while active
  StreamId stream = 0;
  bool small = false;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours within the segment, by address
  Block* next = nullptr;
  bool allocated = false;
  bool mapped = true;              // false only for unmapped ranges of expandable segments
  bool in_pool = false;            // cached and reusable
  bool counted_split = false;      // counted in inactive_split while in the pool
  int event_count = 0;             // outstanding events of a deferred free
  std::set<StreamId> stream_uses;  // other streams that used the block (record_stream)
  uint64_t gc_stamp = 0;           // gc clock when the block entered the pool

  uintptr_t end() const { return addr + size; }
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

struct Segment {
  uintptr_t addr = 0;
  size_t size = 0;  // bytes from the device; for expandable segments the reserved range
  StreamId stream = 0;
  bool small = false;
  bool expandable = false;
  size_t page = 0;    // expandable: mapping granularity
  size_t mapped = 0;  // expandable: bytes mapped
  Block* head = nullptr;
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->addr < b->addr;
  }
};

using BlockPool = std::set<Block*, BlockLess>;

struct Params {
  StreamId stream = 0;
  size_t nbytes = 0;      // as requested
  size_t size = 0;        // rounded
  size_t alloc_size = 0;  // segment size if a new segment is needed
  bool small = false;
};

inline tidemark::events::Pool pool_of(bool small) {
  return small ? tidemark::events::Pool::small : tidemark::events::Pool::large;
}

}  // namespace tl::memory::allocator_detail
