// The caching allocator's policy (PyTorch's CUDA caching allocator, restated):
//
// - Requests are rounded up to a multiple of 512 bytes (kMinBlockSize); with
//   roundup_power2_divisions = d (d > 1) and a request larger than 512 x d bytes, the request
//   is rounded up to the next of d equal steps between the enclosing powers of two.
// - Rounded sizes up to 1 MiB come from the small pool, larger ones from the large pool. The
//   two pools never share segments.
// - When no cached block fits, a new segment is requested from the device: 2 MiB for the
//   small pool, 20 MiB for large requests under 10 MiB, otherwise the request rounded up to
//   2 MiB.
// - Free blocks live in one ordered set per pool keyed by (stream, size, address); the best
//   fit is the first block on the request's stream that is large enough. Two oversize rules
//   keep huge blocks for huge requests: a request under max_split_size never takes a block of
//   max_split_size or more, and a request of max_split_size or more only takes a block smaller
//   than request + max_non_split_rounding.
// - A block larger than the request is split (the request takes the front, the rest goes
//   back to the pool) when the rest is at least 512 bytes in the small pool, or more than
//   1 MiB in the large pool and the request is under max_split_size.
// - On free, a block merges with the previous and next blocks of its segment when those are
//   free; blocks are only ever reused by the stream they were allocated on.
// - record_stream defers the reuse of a block until the other streams' work has finished
//   (Note [Deferred frees]).
// - malloc: (1) complete deferred frees whose events are done, (2) best fit, (3) [free-memory
//   callbacks: tensorlib has none], (4) with a memory fraction and a
//   garbage_collection_threshold, release old cached segments (Note [Garbage collection]),
//   (5) a new segment, (6) with max_split_size, release cached oversize segments and retry,
//   (7) wait for all events, release every cached segment and retry once
//   (num_alloc_retries), (8) tl::OutOfMemoryError.
// - empty_cache waits for pending frees and releases every segment holding no live block.
// - Expandable segments (Note [Expandable segments]) replace per-request segments with one
//   growing range per (stream, pool).
//
// Note [Stats and events order]
// Every statistic changes and every event is emitted under the allocator's mutex, in the
// same order, so a consumer that replays the events (StatsReplayer) sees the same sequence of
// states. Decreases are applied before increases within one step so that peaks never include
// a transient state the events cannot show.

#include "tensorlib/memory/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

#include "profiler/events/events.h"
#include "tensorlib/base/error.h"
#include "tensorlib/memory/caching_allocator_blocks.h"

namespace tl::memory {

namespace ev = tidemark::events;

using namespace allocator_detail;  // Block, Segment, BlockPool, Params, align_up/down, pool_of

// The size policy above: how a request is rounded into a block, and how large a segment is
// reserved for a block that fits no cached one.
size_t CachingAllocator::round_size(size_t nbytes, const AllocatorConfig& config) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  size_t divisions = config.divisions_for(nbytes);
  if (divisions > 1 && nbytes > kMinBlockSize * divisions) {
    // nbytes > 512 x divisions, so each step (floor power of two / divisions) is a power of
    // two of at least 512 bytes and blocks stay multiples of kMinBlockSize.
    size_t floor = std::bit_floor(nbytes);
    if (floor == nbytes) return nbytes;
    return align_up(nbytes, floor / divisions);
  }
  return align_up(nbytes, kMinBlockSize);
}

size_t CachingAllocator::allocation_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return align_up(rounded, kRoundLarge);
}

struct CachingAllocator::Impl {
  std::unique_ptr<DeviceInterface> device;
  AllocatorConfig config;
  bool use_expandable = false;
  ev::DeviceId device_id;

  mutable std::mutex mu;
  DeviceStats stats;
  BlockPool small_pool;
  BlockPool large_pool;
  std::map<uintptr_t, Segment*> segments;                    // owned
  std::map<std::pair<StreamId, bool>, Segment*> expandable;  // (stream, small) -> segment
  std::unordered_set<Block*> allocated;
  std::map<StreamId, std::deque<std::pair<EventId, Block*>>> pending;  // Note [Deferred frees]
  bool fraction_set = false;
  size_t allowed = 0;  // bytes, with fraction_set
  uint64_t gc_clock = 0;
  ev::Sink* own_sink = nullptr;  // set_event_sink
  uint64_t own_seq = 0;

  Impl(std::unique_ptr<DeviceInterface> d, AllocatorConfig c)
      : device(std::move(d)), config(c), device_id(device->device().event_id()) {
    use_expandable = config.expandable_segments && device->supports_expandable();
    stats.max_split_size =
        config.max_split_size == SIZE_MAX ? -1 : static_cast<int64_t>(config.max_split_size);
  }

  ~Impl() {
    for (auto& [stream, queue] : pending)
      for (auto& [event, block] : queue) device->destroy_event(event);
    for (auto& [addr, seg] : segments) {
      if (seg->expandable) {
        for (Block* b = seg->head; b; b = b->next)
          if (b->mapped)
            device->unmap(reinterpret_cast<void*>(seg->addr), b->addr - seg->addr, b->size);
        device->release_range(reinterpret_cast<void*>(seg->addr), seg->size);
      } else {
        device->raw_free(reinterpret_cast<void*>(seg->addr), seg->size);
      }
      for (Block* b = seg->head; b;) {
        Block* next = b->next;
        delete b;
        b = next;
      }
      delete seg;
    }
  }

  // ---- Stats and events -----------------------------------------------------------------

  void update(StatArray& a, bool small, int64_t delta) {
    Stat& all = a[static_cast<size_t>(StatType::all)];
    Stat& pool = a[static_cast<size_t>(small ? StatType::small_pool : StatType::large_pool)];
    if (delta >= 0) {
      all.increase(delta);
      pool.increase(delta);
    } else {
      all.decrease(-delta);
      pool.decrease(-delta);
    }
  }

  int64_t reserved() const {
    return stats.reserved_bytes[static_cast<size_t>(StatType::all)].current;
  }
  int64_t allocated_bytes() const {
    return stats.allocated_bytes[static_cast<size_t>(StatType::all)].current;
  }

  bool emitting() const { return own_sink != nullptr || ev::enabled(); }
  void deliver(ev::Event& e) {
    if (own_sink == nullptr) return ev::dispatch(e);
    e.seq = own_seq++;
    own_sink->on_event(e);
  }

  // Returns the event's timestamp (0 when no sink listens); `ts` reuses an earlier one.
  uint64_t emit_block(ev::Kind kind, const Block& b, uint64_t ts = 0) {
    if (!emitting()) return 0;
    ev::Event e;
    e.ts_ns = ts;
    e.kind = kind;
    e.device = device_id;
    e.block.addr = b.addr;
    e.block.size = b.size;
    e.block.requested_size = b.requested_size;
    e.block.stream = b.stream;
    e.block.segment = b.segment->addr;
    e.block.pool = pool_of(b.small);
    deliver(e);
    return e.ts_ns;
  }

  void emit_segment(ev::Kind kind, const Segment& seg, uintptr_t addr, size_t size) {
    if (!emitting()) return;
    ev::Event e;
    e.kind = kind;
    e.device = device_id;
    e.block.addr = addr;
    e.block.size = size;
    e.block.stream = seg.stream;
    e.block.segment = seg.addr;
    e.block.pool = pool_of(seg.small);
    deliver(e);
  }

  void emit_decision(ev::Kind kind, size_t requested, StreamId stream, size_t released) {
    if (!emitting()) return;
    MemoryInfo info = device->memory_info();
    ev::Event e;
    e.kind = kind;
    e.device = device_id;
    e.allocator.requested_size = requested;
    e.allocator.stream = stream;
    e.allocator.device_free = info.free;
    e.allocator.device_total = info.total;
    e.allocator.allocated = static_cast<uint64_t>(allocated_bytes());
    e.allocator.reserved = static_cast<uint64_t>(reserved());
    e.allocator.released = released;
    deliver(e);
  }

  // ---- Pools ----------------------------------------------------------------------------

  BlockPool& pool_for(bool small) { return small ? small_pool : large_pool; }

  void pool_insert(Block* b) {
    TL_INTERNAL_ASSERT(!b->in_pool && !b->allocated && b->mapped && b->event_count == 0);
    b->in_pool = true;
    b->gc_stamp = gc_clock;
    b->counted_split = !b->segment->expandable && b->is_split();
    if (b->counted_split) {
      update(stats.inactive_split, b->small, 1);
      update(stats.inactive_split_bytes, b->small, static_cast<int64_t>(b->size));
    }
    pool_for(b->small).insert(b);
  }

  void pool_remove(Block* b) {
    TL_INTERNAL_ASSERT(b->in_pool);
    pool_for(b->small).erase(b);
    b->in_pool = false;
    if (b->counted_split) {
      update(stats.inactive_split, b->small, -1);
      update(stats.inactive_split_bytes, b->small, -static_cast<int64_t>(b->size));
      b->counted_split = false;
    }
  }

  // Absorbs `src` (a neighbour of `dst`) into `dst` and deletes it.
  void absorb(Block* dst, Block* src) {
    if (src == dst->prev) {
      dst->addr = src->addr;
      dst->prev = src->prev;
      if (dst->prev)
        dst->prev->next = dst;
      else
        dst->segment->head = dst;
    } else {
      TL_INTERNAL_ASSERT(src == dst->next);
      dst->next = src->next;
      if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    delete src;
  }

  // A cached neighbour merges into a block being freed or mapped.
  void merge_if_free(Block* dst, Block* src) {
    if (src == nullptr || !src->in_pool) return;
    pool_remove(src);
    absorb(dst, src);
  }

  // Inserts a new block covering [addr, addr + size) right before `b`.
  Block* insert_before(Block* b, size_t size) {
    Block* front = new Block;
    front->addr = b->addr;
    front->size = size;
    front->stream = b->stream;
    front->small = b->small;
    front->segment = b->segment;
    front->mapped = b->mapped;
    front->prev = b->prev;
    front->next = b;
    if (b->prev)
      b->prev->next = front;
    else
      b->segment->head = front;
    b->prev = front;
    b->addr += size;
    b->size -= size;
    return front;
  }

  // Splits `b` after `size` bytes; returns the new block holding the rest.
  Block* split_after(Block* b, size_t size) {
    Block* rest = new Block;
    rest->addr = b->addr + size;
    rest->size = b->size - size;
    rest->stream = b->stream;
    rest->small = b->small;
    rest->segment = b->segment;
    rest->mapped = b->mapped;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    return rest;
  }

  // ---- Policy -------------------------------------------------------------------------

  bool gc_enabled() const { return fraction_set && config.garbage_collection_threshold > 0.0; }

  Block* get_free_block(const Params& p) {
    if (gc_enabled()) ++gc_clock;
    BlockPool& pool = pool_for(p.small);
    Block key;
    key.stream = p.stream;
    key.size = p.size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != p.stream) return nullptr;
    Block* b = *it;
    if (!b->segment->expandable) {
      size_t max_split = config.max_split_size;
      if (p.size < max_split && b->size >= max_split) return nullptr;
      if (p.size >= max_split && b->size >= p.size + config.max_non_split_rounding) return nullptr;
    }
    pool_remove(b);
    return b;
  }

  bool should_split(const Block& b, size_t size) const {
    size_t remaining = b.size - size;
    if (b.small || b.segment->expandable) return remaining >= kMinBlockSize;
    return size < config.max_split_size && remaining > kSmallSize;
  }

  DataPtr alloc_found_block(Block* b, const Params& p) {
    if (should_split(*b, p.size)) pool_insert(split_after(b, p.size));
    b->allocated = true;
    b->requested_size = p.nbytes;
    allocated.insert(b);
    const auto size = static_cast<int64_t>(b->size);
    update(stats.allocation, b->small, 1);
    update(stats.allocated_bytes, b->small, size);
    update(stats.requested_bytes, b->small, static_cast<int64_t>(p.nbytes));
    update(stats.active, b->small, 1);
    update(stats.active_bytes, b->small, size);
    if (b->size >= config.max_split_size) stats.oversize_allocations.increase(1);
    emit_block(ev::Kind::alloc, *b);
    return DataPtr{reinterpret_cast<void*>(b->addr), b, nullptr, p.nbytes};
  }

  bool fits_fraction(size_t bytes) const {
    return !fraction_set || static_cast<size_t>(reserved()) + bytes <= allowed;
  }

  // Step 5: a new segment holding one free block (not in the pool), or nullptr.
  Block* alloc_segment(const Params& p) {
    if (use_expandable) return alloc_expandable(p);
    size_t size = p.alloc_size;
    if (!fits_fraction(size)) return nullptr;
    void* ptr = device->raw_alloc(size);
    if (ptr == nullptr) return nullptr;
    auto* seg = new Segment;
    seg->addr = reinterpret_cast<uintptr_t>(ptr);
    seg->size = size;
    seg->stream = p.stream;
    seg->small = p.small;
    auto* b = new Block;
    b->addr = seg->addr;
    b->size = size;
    b->stream = p.stream;
    b->small = p.small;
    b->segment = seg;
    seg->head = b;
    segments[seg->addr] = seg;
    update(stats.segment, p.small, 1);
    update(stats.reserved_bytes, p.small, static_cast<int64_t>(size));
    if (size >= config.max_split_size) stats.oversize_segments.increase(1);
    ++stats.num_device_alloc;
    emit_segment(ev::Kind::segment_alloc, *seg, seg->addr, size);
    return b;
  }

  // Returns a whole cached segment to the device.
  void release_segment(Block* b) {
    TL_INTERNAL_ASSERT(b->in_pool && !b->is_split() && !b->segment->expandable);
    pool_remove(b);
    Segment* seg = b->segment;
    device->raw_free(reinterpret_cast<void*>(seg->addr), seg->size);
    update(stats.segment, seg->small, -1);
    update(stats.reserved_bytes, seg->small, -static_cast<int64_t>(seg->size));
    if (seg->size >= config.max_split_size) stats.oversize_segments.decrease(1);
    ++stats.num_device_free;
    emit_segment(ev::Kind::segment_free, *seg, seg->addr, seg->size);
    segments.erase(seg->addr);
    delete b;
    delete seg;
  }

  // Note [Expandable segments]
  // With expandable_segments:True each (stream, pool) has one segment: a reserved address
  // range (as large as the device) whose blocks tile the whole range. Blocks are either
  // mapped (allocated or cached as usual) or unmapped (address space only, never in a pool).
  // When no cached block fits, the allocator maps pages (2 MiB small / 20 MiB large) at the
  // lowest unmapped block that, together with a cached block just before it, holds the
  // request; the new pages merge with that block, so the segment grows in place instead of
  // fragmenting into many segments. empty_cache (and the OOM retry) unmaps every whole page
  // inside cached blocks. In snapshots each run of mapped blocks appears as one segment with
  // is_expandable set; the `segment` statistic counts expandable segments with any page
  // mapped; blocks in expandable segments split at 512 B in both pools, ignore the oversize
  // rules and do not count as inactive_split.
  Segment* expandable_segment(const Params& p) {
    auto key = std::make_pair(p.stream, p.small);
    if (auto it = expandable.find(key); it != expandable.end()) return it->second;
    size_t page = p.small ? kSmallBuffer : kLargeBuffer;
    size_t range = align_up(std::max(device->memory_info().total, p.size), page);
    void* base = device->reserve_range(range);
    if (base == nullptr) return nullptr;
    auto* seg = new Segment;
    seg->addr = reinterpret_cast<uintptr_t>(base);
    seg->size = range;
    seg->stream = p.stream;
    seg->small = p.small;
    seg->expandable = true;
    seg->page = page;
    auto* b = new Block;
    b->addr = seg->addr;
    b->size = range;
    b->stream = p.stream;
    b->small = p.small;
    b->segment = seg;
    b->mapped = false;
    seg->head = b;
    segments[seg->addr] = seg;
    expandable[key] = seg;
    return seg;
  }

  Block* alloc_expandable(const Params& p) {
    Segment* seg = expandable_segment(p);
    if (seg == nullptr) return nullptr;
    for (Block* u = seg->head; u; u = u->next) {
      if (u->mapped) continue;
      Block* before = u->prev && u->prev->in_pool ? u->prev : nullptr;
      size_t have = before ? before->size : 0;
      if (have >= p.size || have + u->size < p.size) continue;
      size_t need = align_up(p.size - have, seg->page);
      if (!fits_fraction(need)) return nullptr;
      if (!device->map(reinterpret_cast<void*>(seg->addr), u->addr - seg->addr, need))
        return nullptr;
      Block* m = need == u->size ? u : insert_before(u, need);
      m->mapped = true;
      bool first = seg->mapped == 0;
      seg->mapped += need;
      if (first) update(stats.segment, seg->small, 1);
      update(stats.reserved_bytes, seg->small, static_cast<int64_t>(need));
      ++stats.num_device_alloc;
      emit_segment(ev::Kind::segment_map, *seg, m->addr, need);
      merge_if_free(m, m->prev);
      merge_if_free(m, m->next);
      return m;
    }
    return nullptr;
  }

  // Unmaps the whole pages inside cached block `b` of an expandable segment; returns bytes.
  size_t unmap_block(Block* b) {
    Segment* seg = b->segment;
    uintptr_t lo = seg->addr + align_up(b->addr - seg->addr, seg->page);
    uintptr_t hi = seg->addr + align_down(b->end() - seg->addr, seg->page);
    if (lo >= hi) return 0;
    pool_remove(b);
    Block* head = lo > b->addr ? insert_before(b, lo - b->addr) : nullptr;
    Block* tail = hi < b->end() ? split_after(b, hi - lo) : nullptr;
    b->mapped = false;
    device->unmap(reinterpret_cast<void*>(seg->addr), lo - seg->addr, hi - lo);
    seg->mapped -= hi - lo;
    update(stats.reserved_bytes, seg->small, -static_cast<int64_t>(hi - lo));
    if (seg->mapped == 0) update(stats.segment, seg->small, -1);
    ++stats.num_device_free;
    emit_segment(ev::Kind::segment_unmap, *seg, lo, hi - lo);
    if (b->prev && !b->prev->mapped) absorb(b, b->prev);
    if (b->next && !b->next->mapped) absorb(b, b->next);
    if (head) pool_insert(head);
    if (tail) pool_insert(tail);
    return hi - lo;
  }

  size_t unmap_expandable() {
    size_t released = 0;
    bool synced = false;
    for (auto it = expandable.begin(); it != expandable.end();) {
      Segment* seg = it->second;
      // unmap_block keeps `b` but may absorb its unmapped neighbours: read b->next after it.
      for (Block* b = seg->head; b; b = b->next) {
        if (!b->in_pool) continue;
        if (!synced) {
          device->synchronize_device();  // pages must be idle before they are unmapped
          synced = true;
        }
        released += unmap_block(b);
      }
      if (seg->mapped == 0) {
        TL_INTERNAL_ASSERT(seg->head && !seg->head->next && !seg->head->mapped);
        device->release_range(reinterpret_cast<void*>(seg->addr), seg->size);
        segments.erase(seg->addr);
        delete seg->head;
        delete seg;
        it = expandable.erase(it);
      } else {
        ++it;
      }
    }
    return released;
  }

  // Note [Deferred frees]
  // A block freed while streams other than its own still use it (record_stream) cannot be
  // reused yet: the device may still be reading or writing it. deallocate records one event
  // per such stream and keeps the block out of the pool: allocated bytes drop at once
  // (free_requested), active bytes only when every event has completed (free_completed).
  // Events are polled in FIFO order per stream at the start of each malloc; empty_cache,
  // synchronize and the OOM retry wait for all of them. The snapshot shows such a block as
  // active_pending_free.
  void free_block(Block* b, uint64_t ts = 0) {
    update(stats.active, b->small, -1);
    update(stats.active_bytes, b->small, -static_cast<int64_t>(b->size));
    emit_block(ev::Kind::free_completed, *b, ts);
    b->requested_size = 0;
    merge_if_free(b, b->prev);
    merge_if_free(b, b->next);
    pool_insert(b);
  }

  void process_events() {
    for (auto it = pending.begin(); it != pending.end();) {
      auto& queue = it->second;
      while (!queue.empty()) {
        auto [event, block] = queue.front();
        if (!device->query_event(event)) break;
        device->destroy_event(event);
        queue.pop_front();
        if (--block->event_count == 0) free_block(block);
      }
      it = queue.empty() ? pending.erase(it) : std::next(it);
    }
  }

  void synchronize_and_free_events() {
    ++stats.num_sync_all_streams;
    for (auto& [stream, queue] : pending) {
      for (auto [event, block] : queue) {
        device->synchronize_event(event);
        device->destroy_event(event);
        if (--block->event_count == 0) free_block(block);
      }
    }
    pending.clear();
  }

  // Step 7 and empty_cache: every cached segment without live blocks goes back.
  size_t release_cached_blocks() {
    synchronize_and_free_events();
    size_t released = 0;
    for (BlockPool* pool : {&large_pool, &small_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it++;
        if (!b->is_split() && !b->segment->expandable) {
          released += b->size;
          release_segment(b);
        }
      }
    }
    return released + unmap_expandable();
  }

  // Step 6: with max_split_size, release the smallest cached oversize segment that holds the
  // request, or else the largest ones until enough bytes are free.
  bool release_available_cached_blocks(const Params& p) {
    if (config.max_split_size == SIZE_MAX || use_expandable) return false;
    BlockPool& pool = pool_for(p.small);
    Block key;
    key.stream = p.stream;
    key.size = std::max(p.size, config.max_split_size);
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == p.stream) {
      if ((*it)->is_split()) return false;
      release_segment(*it);
      return true;
    }
    if (it == pool.begin()) return false;
    size_t released = 0;
    --it;
    while (released < key.size && (*it)->size >= config.max_split_size &&
           (*it)->stream == p.stream) {
      auto cur = it;
      bool first = it == pool.begin();
      if (!first) --it;
      if (!(*cur)->is_split()) {
        released += (*cur)->size;
        release_segment(*cur);
      }
      if (first) break;
    }
    return released >= key.size;
  }

  // Note [Garbage collection]
  // With a memory fraction and garbage_collection_threshold t, a malloc that misses the cache
  // first checks reserved memory against t x allowed. Above it, cached large-pool segments
  // with no live block are released oldest first: each pass releases those at least as old as
  // the average, until enough is reclaimed or nothing is left. A block's age counts the cache
  // lookups (any pool) since it was cached.
  void garbage_collect() {
    auto threshold =
        static_cast<size_t>(config.garbage_collection_threshold * static_cast<double>(allowed));
    auto now = static_cast<size_t>(reserved());
    if (now <= threshold) return;
    size_t target = now - threshold;
    size_t reclaimed = 0;
    double total_age = 0.0;
    size_t count = 0;
    for (Block* b : large_pool) {
      if (!b->is_split() && !b->segment->expandable) {
        total_age += static_cast<double>(gc_clock - b->gc_stamp);
        ++count;
      }
    }
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
      double average = total_age / static_cast<double>(count);
      freed = false;
      for (auto it = large_pool.begin(); it != large_pool.end();) {
        Block* b = *it++;
        if (b->is_split() || b->segment->expandable) continue;
        auto age = static_cast<double>(gc_clock - b->gc_stamp);
        if (age >= average) {
          freed = true;
          reclaimed += b->size;
          total_age -= age;
          --count;
          release_segment(b);
        }
      }
    }
  }

  [[noreturn]] void throw_oom(std::unique_lock<std::mutex>& lock, const Params& p) {
    MemoryInfo info = device->memory_info();
    ++stats.num_ooms;
    emit_decision(ev::Kind::oom, p.nbytes, p.stream, 0);
    OutOfMemoryError::Details d;
    d.device = device->device().str();
    d.requested_bytes = p.nbytes;
    d.allocation_bytes = p.alloc_size;
    d.device_free = info.free;
    d.device_total = info.total;
    d.allocated = static_cast<size_t>(allocated_bytes());
    d.reserved = static_cast<size_t>(reserved());
    d.allowed = fraction_set ? allowed : 0;
    Snapshot snap = snapshot_locked();
    lock.unlock();
    throw OutOfMemoryError(std::move(d), std::move(snap));
  }

  DataPtr allocate_block(size_t nbytes, StreamId stream) {
    std::unique_lock<std::mutex> lock(mu);
    process_events();  // 1
    Params p;
    p.stream = stream;
    p.nbytes = nbytes;
    p.size = round_size(nbytes, config);
    p.small = p.size <= kSmallSize;
    p.alloc_size = allocation_size(p.size);
    Block* b = get_free_block(p);  // 2 (3: no free-memory callbacks)
    if (b == nullptr) {
      if (gc_enabled()) garbage_collect();                                           // 4
      b = alloc_segment(p);                                                          // 5
      if (b == nullptr && release_available_cached_blocks(p)) b = alloc_segment(p);  // 6
      if (b == nullptr) {                                                            // 7
        size_t released = release_cached_blocks();
        ++stats.num_alloc_retries;
        emit_decision(ev::Kind::alloc_retry, nbytes, stream, released);
        b = alloc_segment(p);
      }
    }
    if (b == nullptr) throw_oom(lock, p);  // 8
    return alloc_found_block(b, p);
  }

  void deallocate_block(Block* b) {
    std::lock_guard<std::mutex> guard(mu);
    TL_INTERNAL_ASSERT(allocated.erase(b) == 1, "deallocate of a block that is not allocated");
    b->allocated = false;
    update(stats.allocation, b->small, -1);
    update(stats.allocated_bytes, b->small, -static_cast<int64_t>(b->size));
    update(stats.requested_bytes, b->small, -static_cast<int64_t>(b->requested_size));
    if (b->size >= config.max_split_size) stats.oversize_allocations.decrease(1);
    uint64_t ts = emit_block(ev::Kind::free_requested, *b);
    if (b->stream_uses.empty()) {
      free_block(b, ts);  // the same instant: one clock read for both events
      return;
    }
    for (StreamId s : b->stream_uses) {
      pending[s].push_back({device->record_event(s), b});
      ++b->event_count;
    }
    b->stream_uses.clear();
  }

  Snapshot snapshot_locked() const {
    Snapshot snap;
    snap.device = device_id;
    auto block_snapshot = [](const Block* b) {
      BlockSnapshot bs;
      bs.address = b->addr;
      bs.size = b->size;
      bs.requested_size = b->requested_size;
      bs.state = b->allocated         ? BlockState::active_allocated
                 : b->event_count > 0 ? BlockState::active_pending_free
                                      : BlockState::inactive;
      return bs;
    };
    for (const auto& [addr, seg] : segments) {
      SegmentSnapshot* cur = nullptr;
      for (const Block* b = seg->head; b; b = b->next) {
        if (!b->mapped) {
          cur = nullptr;
          continue;
        }
        if (cur == nullptr) {
          cur = &snap.segments.emplace_back();
          cur->address = b->addr;
          cur->stream = seg->stream;
          cur->pool = pool_of(seg->small);
          cur->is_expandable = seg->expandable;
        }
        BlockSnapshot bs = block_snapshot(b);
        cur->total_size += bs.size;
        if (bs.state == BlockState::active_allocated) cur->allocated_size += bs.size;
        if (bs.state != BlockState::inactive) {
          cur->active_size += bs.size;
          cur->requested_size += bs.requested_size;
        }
        cur->blocks.push_back(bs);
      }
    }
    return snap;
  }
};

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceInterface> device,
                                   AllocatorConfig config) {
  TL_CHECK(device != nullptr, "CachingAllocator needs a device, got nullptr");
  impl_ = std::make_unique<Impl>(std::move(device), config);
}

CachingAllocator::~CachingAllocator() = default;

DataPtr CachingAllocator::allocate(size_t nbytes) {
  return allocate(nbytes, 0);
}

DataPtr CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return DataPtr{nullptr, nullptr, this, 0};
  DataPtr p = impl_->allocate_block(nbytes, stream);
  p.owner = this;
  return p;
}

void CachingAllocator::deallocate(const DataPtr& p) noexcept {
  if (p.ctx == nullptr) return;
  impl_->deallocate_block(static_cast<Block*>(p.ctx));
}

void CachingAllocator::record_stream(const DataPtr& p, StreamId stream) {
  if (p.ctx == nullptr) return;
  std::lock_guard<std::mutex> guard(impl_->mu);
  auto* b = static_cast<Block*>(p.ctx);
  TL_CHECK(impl_->allocated.count(b) == 1, "record_stream: the block at ", p.ptr,
           " is not allocated by this allocator");
  if (stream != b->stream) b->stream_uses.insert(stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  size_t released = impl_->release_cached_blocks();
  impl_->emit_decision(ev::Kind::empty_cache, 0, 0, released);
}

void CachingAllocator::synchronize() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->synchronize_and_free_events();
}

DeviceStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> guard(impl_->mu);
  return impl_->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->stats.reset_peak();
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->stats.reset_accumulated();
}

Snapshot CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> guard(impl_->mu);
  return impl_->snapshot_locked();
}

size_t CachingAllocator::largest_cached_block() const {
  std::lock_guard<std::mutex> guard(impl_->mu);
  size_t largest = 0;
  for (const BlockPool* pool : {&impl_->small_pool, &impl_->large_pool})
    for (const Block* b : *pool) largest = std::max(largest, b->size);
  return largest;
}

void CachingAllocator::set_event_sink(tidemark::events::Sink* sink) {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->own_sink = sink;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  TL_CHECK(fraction >= 0.0 && fraction <= 1.0,
           "set_memory_fraction: fraction must be between 0 and 1, got ", fraction);
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->allowed =
      static_cast<size_t>(fraction * static_cast<double>(impl_->device->memory_info().total));
  impl_->fraction_set = true;
}

const AllocatorConfig& CachingAllocator::config() const {
  return impl_->config;
}

Device CachingAllocator::device() const {
  return impl_->device->device();
}

DeviceInterface& CachingAllocator::device_interface() {
  return *impl_->device;
}

}  // namespace tl::memory
