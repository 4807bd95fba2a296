#include "tensorlib/memory/stats_replayer.h"

#include "tensorlib/base/error.h"

namespace tl::memory {

namespace ev = tidemark::events;

namespace {

void update(StatArray& a, bool small, int64_t delta) {
  for (StatType t : {StatType::all, small ? StatType::small_pool : StatType::large_pool}) {
    Stat& s = a[static_cast<size_t>(t)];
    if (delta >= 0)
      s.increase(delta);
    else
      s.decrease(-delta);
  }
}

// The free gap around [addr, addr + size) in a segment: from the end of the previous active
// block (or the segment start) to the start of the next one (or the segment end).
std::pair<uint64_t, uint64_t> gap_around(const std::map<uint64_t, uint64_t>& active,
                                         uint64_t segment, uint64_t segment_size, uint64_t addr) {
  uint64_t lo = segment;
  uint64_t hi = segment + segment_size;
  auto next = active.upper_bound(addr);
  if (next != active.end()) hi = next->first;
  auto prev = active.lower_bound(addr);
  if (prev != active.begin()) {
    --prev;
    lo = prev->first + prev->second;
  }
  return {lo, hi};
}

// inactive_split counts the free gaps of segments that hold at least one active block (a
// segment without one is a single unsplit free block). Decreases go first, as in the
// allocator (Note [Stats and events order]).
void apply_split_delta(DeviceStats& s, bool small, int64_t count_before, int64_t bytes_before,
                       int64_t count_after, int64_t bytes_after) {
  if (count_before) update(s.inactive_split, small, -count_before);
  if (bytes_before) update(s.inactive_split_bytes, small, -bytes_before);
  if (count_after) update(s.inactive_split, small, count_after);
  if (bytes_after) update(s.inactive_split_bytes, small, bytes_after);
}

}  // namespace

void StatsReplayer::on_alloc(DeviceState& d, const ev::BlockInfo& b) {
  bool small = b.pool == ev::Pool::small;
  update(d.stats.allocation, small, 1);
  update(d.stats.active, small, 1);
  auto it = d.segments.find(b.segment);
  TL_CHECK(it != d.segments.end(), "StatsReplayer: alloc at ", b.addr,
           " in a segment it has not seen (replay must start with the allocator)");
  SegmentState& seg = it->second;
  if (!seg.expandable) {
    auto [lo, hi] = gap_around(seg.active, b.segment, seg.size, b.addr);
    int64_t count_before = seg.active.empty() ? 0 : 1;
    int64_t bytes_before = count_before ? static_cast<int64_t>(hi - lo) : 0;
    int64_t count_after = (b.addr > lo ? 1 : 0) + (b.addr + b.size < hi ? 1 : 0);
    auto bytes_after = static_cast<int64_t>((b.addr - lo) + (hi - b.addr - b.size));
    apply_split_delta(d.stats, small, count_before, bytes_before, count_after, bytes_after);
  }
  seg.active[b.addr] = b.size;
}

void StatsReplayer::on_free_completed(DeviceState& d, const ev::BlockInfo& b) {
  bool small = b.pool == ev::Pool::small;
  update(d.stats.active, small, -1);
  auto it = d.segments.find(b.segment);
  TL_CHECK(it != d.segments.end(), "StatsReplayer: free_completed at ", b.addr,
           " in a segment it has not seen");
  SegmentState& seg = it->second;
  seg.active.erase(b.addr);
  if (!seg.expandable) {
    auto [lo, hi] = gap_around(seg.active, b.segment, seg.size, b.addr);
    int64_t count_before = (b.addr > lo ? 1 : 0) + (b.addr + b.size < hi ? 1 : 0);
    auto bytes_before = static_cast<int64_t>((b.addr - lo) + (hi - b.addr - b.size));
    int64_t count_after = seg.active.empty() ? 0 : 1;
    int64_t bytes_after = count_after ? static_cast<int64_t>(hi - lo) : 0;
    apply_split_delta(d.stats, small, count_before, bytes_before, count_after, bytes_after);
  }
}

void StatsReplayer::on_event(const ev::Event& e) {
  DeviceState& d = devices_[{static_cast<int>(e.device.type), e.device.index}];
  DeviceStats& s = d.stats;
  const ev::BlockInfo& b = e.block;
  bool small = b.pool == ev::Pool::small;
  if (ev::payload_of(e.kind) == ev::Payload::block) {
    // The byte statistics are the memory curves (Note [Memory curves] in events.h) per pool.
    const ev::Curves by = ev::curve_delta(e);
    update(s.allocated_bytes, small, by.allocated);
    update(s.active_bytes, small, by.active);
    update(s.reserved_bytes, small, by.reserved);
    update(s.requested_bytes, small, by.requested);
  }
  switch (e.kind) {
    case ev::Kind::segment_alloc:
      d.segments[b.segment] = SegmentState{b.size, small, false, {}};
      update(s.segment, small, 1);
      ++s.num_device_alloc;
      break;
    case ev::Kind::segment_free:
      d.segments.erase(b.segment);
      update(s.segment, small, -1);
      ++s.num_device_free;
      break;
    case ev::Kind::segment_map: {
      SegmentState& seg = d.segments[b.segment];
      seg.small = small;
      seg.expandable = true;
      if (seg.size == 0) update(s.segment, small, 1);
      seg.size += b.size;
      ++s.num_device_alloc;
      break;
    }
    case ev::Kind::segment_unmap: {
      SegmentState& seg = d.segments[b.segment];
      seg.size -= b.size;
      if (seg.size == 0) {
        update(s.segment, small, -1);
        d.segments.erase(b.segment);
      }
      ++s.num_device_free;
      break;
    }
    case ev::Kind::alloc:
      on_alloc(d, b);
      break;
    case ev::Kind::free_requested:
      update(s.allocation, small, -1);
      break;
    case ev::Kind::free_completed:
      on_free_completed(d, b);
      break;
    case ev::Kind::alloc_retry:
      ++s.num_alloc_retries;
      break;
    case ev::Kind::oom:
      ++s.num_ooms;
      break;
    default:
      break;
  }
}

DeviceStats StatsReplayer::stats(ev::DeviceId device) const {
  auto it = devices_.find({static_cast<int>(device.type), device.index});
  return it == devices_.end() ? DeviceStats{} : it->second.stats;
}

}  // namespace tl::memory
