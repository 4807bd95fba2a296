// Helpers shared by the caching allocator tests: a fake-device allocator, an event-collecting
// sink and an invariant check that recomputes every statistic from a snapshot walk.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "profiler/events/events.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"

namespace tl::memory::testing {

inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;

struct FakeAllocator {
  FakeDevice* device = nullptr;  // owned by `alloc`
  std::unique_ptr<CachingAllocator> alloc;

  explicit FakeAllocator(AllocatorConfig config = {}, size_t capacity = size_t{16} << 30) {
    auto dev = std::make_unique<FakeDevice>(capacity);
    device = dev.get();
    alloc = std::make_unique<CachingAllocator>(std::move(dev), config);
  }
  CachingAllocator* operator->() { return alloc.get(); }
};

inline uintptr_t addr(const DataPtr& p) {
  return reinterpret_cast<uintptr_t>(p.ptr);
}

inline const Stat& all(const StatArray& a) {
  return a[0];
}
inline const Stat& small(const StatArray& a) {
  return a[1];
}
inline const Stat& large(const StatArray& a) {
  return a[2];
}

// Collects allocator events (copies: Note [Event lifetime]). Installed for its lifetime.
class CollectingSink : public tidemark::events::Sink {
 public:
  CollectingSink() { EXPECT_TRUE(tidemark::events::add_sink(this)); }
  ~CollectingSink() override { tidemark::events::remove_sink(this); }
  void on_event(const tidemark::events::Event& e) noexcept override {
    std::lock_guard<std::mutex> guard(mu_);
    events_.push_back(e);
  }
  std::vector<tidemark::events::Event> take() {
    std::lock_guard<std::mutex> guard(mu_);
    return std::exchange(events_, {});
  }

 private:
  std::mutex mu_;
  std::vector<tidemark::events::Event> events_;
};

// The statistics a snapshot implies, computed by walking it.
struct WalkedStats {
  int64_t allocation[3] = {}, allocated_bytes[3] = {}, requested_bytes[3] = {};
  int64_t active[3] = {}, active_bytes[3] = {};
  int64_t segment[3] = {}, reserved_bytes[3] = {};
  int64_t inactive_split[3] = {}, inactive_split_bytes[3] = {};
};

// Checks the layout invariants of `snap` and returns the statistics it implies.
inline WalkedStats check_snapshot(const Snapshot& snap) {
  WalkedStats w;
  std::set<std::pair<uint64_t, tidemark::events::Pool>> expandable_segments;
  uint64_t previous_end = 0;
  for (const SegmentSnapshot& seg : snap.segments) {
    int p = seg.pool == tidemark::events::Pool::small ? 1 : 2;
    EXPECT_GE(seg.address, previous_end) << "segments overlap";
    previous_end = seg.address + seg.total_size;
    EXPECT_FALSE(seg.blocks.empty());
    uint64_t cursor = seg.address;
    size_t allocated = 0, active = 0, requested = 0;
    bool previous_inactive = false;
    for (const BlockSnapshot& b : seg.blocks) {
      EXPECT_EQ(b.address, cursor) << "blocks must tile their segment";
      EXPECT_EQ(b.size % kMinBlockSize, 0u);
      EXPECT_GT(b.size, 0u);
      cursor += b.size;
      bool inactive = b.state == BlockState::inactive;
      if (!seg.is_expandable) {
        EXPECT_FALSE(inactive && previous_inactive) << "two adjacent free blocks not merged";
      }
      previous_inactive = inactive;
      if (b.state == BlockState::active_allocated) {
        allocated += b.size;
        for (int i : {0, p}) {
          w.allocation[i] += 1;
          w.allocated_bytes[i] += static_cast<int64_t>(b.size);
          w.requested_bytes[i] += static_cast<int64_t>(b.requested_size);
        }
        EXPECT_LE(b.requested_size, b.size);
        EXPECT_GT(b.requested_size, 0u);
      }
      if (!inactive) {
        active += b.size;
        requested += b.requested_size;
        for (int i : {0, p}) {
          w.active[i] += 1;
          w.active_bytes[i] += static_cast<int64_t>(b.size);
        }
      } else {
        EXPECT_EQ(b.requested_size, 0u);
        if (!seg.is_expandable && seg.blocks.size() > 1) {
          for (int i : {0, p}) {
            w.inactive_split[i] += 1;
            w.inactive_split_bytes[i] += static_cast<int64_t>(b.size);
          }
        }
      }
    }
    EXPECT_EQ(cursor, seg.address + seg.total_size);
    EXPECT_EQ(seg.allocated_size, allocated);
    EXPECT_EQ(seg.active_size, active);
    EXPECT_EQ(seg.requested_size, requested);
    for (int i : {0, p}) w.reserved_bytes[i] += static_cast<int64_t>(seg.total_size);
    if (seg.is_expandable) {
      if (expandable_segments.insert({seg.stream, seg.pool}).second)
        for (int i : {0, p}) w.segment[i] += 1;
    } else {
      for (int i : {0, p}) w.segment[i] += 1;
    }
  }
  return w;
}

// The allocator's current statistics must equal what its snapshot implies.
inline void expect_stats_match_snapshot(CachingAllocator& a) {
  Snapshot snap = a.snapshot();
  DeviceStats s = a.stats();
  WalkedStats w = check_snapshot(snap);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(::testing::Message() << "stat type " << i);
    EXPECT_EQ(s.allocation[i].current, w.allocation[i]);
    EXPECT_EQ(s.allocated_bytes[i].current, w.allocated_bytes[i]);
    EXPECT_EQ(s.requested_bytes[i].current, w.requested_bytes[i]);
    EXPECT_EQ(s.active[i].current, w.active[i]);
    EXPECT_EQ(s.active_bytes[i].current, w.active_bytes[i]);
    EXPECT_EQ(s.segment[i].current, w.segment[i]);
    EXPECT_EQ(s.reserved_bytes[i].current, w.reserved_bytes[i]);
    EXPECT_EQ(s.inactive_split[i].current, w.inactive_split[i]);
    EXPECT_EQ(s.inactive_split_bytes[i].current, w.inactive_split_bytes[i]);
  }
}

}  // namespace tl::memory::testing
