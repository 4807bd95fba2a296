// Statistics: PyTorch's flat keys and their meaning, randomized sequences checked against a
// snapshot walk after every step, event replay (StatsReplayer) and a multi-thread hammer.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "allocator_test_util.h"
#include "tensorlib/memory/stats_replayer.h"

namespace tl::memory {
namespace {

using namespace testing;  // NOLINT
using K = tidemark::events::Kind;

TEST(AllocatorStats, FlatKeysFollowPyTorch) {
  FakeAllocator a;
  DataPtr p = a->allocate(1000);
  DataPtr q = a->allocate(5 * MiB);
  auto flat = flat_stats(a->stats());
  EXPECT_EQ(flat.size(), 9u * 3 * 4 + 2 * 4 + 6);
  EXPECT_EQ(flat.at("allocated_bytes.all.current"), int64_t(1024 + 5 * MiB));
  EXPECT_EQ(flat.at("allocated_bytes.small_pool.current"), 1024);
  EXPECT_EQ(flat.at("requested_bytes.all.current"), int64_t(1000 + 5 * MiB));
  EXPECT_EQ(flat.at("reserved_bytes.large_pool.current"), int64_t(20 * MiB));
  EXPECT_EQ(flat.at("reserved_bytes.all.peak"), int64_t(22 * MiB));
  EXPECT_EQ(flat.at("segment.all.current"), 2);
  EXPECT_EQ(flat.at("allocation.all.allocated"), 2);
  EXPECT_EQ(flat.at("inactive_split.small_pool.current"), 1);
  EXPECT_EQ(flat.at("inactive_split_bytes.small_pool.current"), int64_t(2 * MiB - 1024));
  EXPECT_EQ(flat.at("inactive_split.large_pool.current"), 1);
  EXPECT_EQ(flat.at("inactive_split_bytes.large_pool.current"), int64_t(15 * MiB));
  EXPECT_EQ(flat.at("oversize_allocations.current"), 0);
  EXPECT_EQ(flat.at("num_device_alloc"), 2);
  EXPECT_EQ(flat.at("num_ooms"), 0);
  EXPECT_EQ(flat.at("max_split_size"), -1);
  a->deallocate(p);
  a->deallocate(q);
  flat = flat_stats(a->stats());
  EXPECT_EQ(flat.at("inactive_split_bytes.small_pool.freed"), int64_t(2 * MiB - 1024));
  EXPECT_EQ(flat.at("inactive_split.all.current"), 0);
}

TEST(AllocatorStats, PeaksAndResets) {
  FakeAllocator a;
  DataPtr p = a->allocate(4096);
  DataPtr q = a->allocate(8192);
  a->deallocate(p);
  a->deallocate(q);
  DeviceStats s = a->stats();
  EXPECT_EQ(all(s.allocated_bytes).current, 0);
  EXPECT_EQ(all(s.allocated_bytes).peak, 12288);
  EXPECT_EQ(all(s.allocated_bytes).allocated, 12288);
  EXPECT_EQ(all(s.allocated_bytes).freed, 12288);
  EXPECT_EQ(all(s.reserved_bytes).current, int64_t(2 * MiB));
  a->reset_peak_stats();
  s = a->stats();
  EXPECT_EQ(all(s.allocated_bytes).peak, 0);
  EXPECT_EQ(all(s.reserved_bytes).peak, int64_t(2 * MiB));
  a->reset_accumulated_stats();
  s = a->stats();
  EXPECT_EQ(all(s.allocated_bytes).allocated, 0);
  EXPECT_EQ(all(s.allocated_bytes).freed, 0);
  EXPECT_EQ(s.num_device_alloc, 0);
  EXPECT_EQ(all(s.reserved_bytes).current, int64_t(2 * MiB));
}

TEST(AllocatorStats, AllocatedDropsAtFreeRequestedActiveAtFreeCompleted) {
  FakeAllocator a;
  DataPtr p = a->allocate(10000);  // 10240
  a->record_stream(p, 2);
  a->deallocate(p);
  DeviceStats s = a->stats();
  EXPECT_EQ(all(s.allocation).current, 0);
  EXPECT_EQ(all(s.requested_bytes).current, 0);
  EXPECT_EQ(all(s.active).current, 1);
  EXPECT_EQ(all(s.active_bytes).current, 10240);
  a.device->complete_all();
  DataPtr q = a->allocate(512);  // processes the event first
  s = a->stats();
  EXPECT_EQ(all(s.active).current, 1);
  EXPECT_EQ(all(s.active_bytes).current, 512);
  EXPECT_EQ(all(s.active_bytes).freed, 10240);
  a->deallocate(q);
}

// A random mix of allocations (all three size classes, three streams), frees, record_stream,
// event completions, empty_cache and synchronize, within a capacity small enough for OOMs.
class RandomWorkload {
 public:
  RandomWorkload(FakeAllocator& a, uint64_t seed) : a_(a), rng_(seed) {}

  // One operation; returns its name for failure messages.
  const char* step() {
    int op = static_cast<int>(rng_() % 100);
    if (op < 45 || live_.empty()) {
      size_t size = pick_size();
      StreamId stream = rng_() % 3;
      try {
        live_.push_back(a_->allocate(size, stream));
      } catch (const tl::OutOfMemoryError&) {
        ++ooms_;
      }
      return "allocate";
    }
    size_t i = rng_() % live_.size();
    if (op < 82) {
      a_->deallocate(live_[i]);
      live_[i] = live_.back();
      live_.pop_back();
      return "deallocate";
    }
    if (op < 92) {
      a_->record_stream(live_[i], rng_() % 3);
      return "record_stream";
    }
    if (op < 98) {
      auto pending = a_.device->pending_events();
      if (!pending.empty()) a_.device->complete_event(pending[rng_() % pending.size()].first);
      return "complete_event";
    }
    if (op < 99) {
      a_->empty_cache();
      return "empty_cache";
    }
    a_->synchronize();
    return "synchronize";
  }

  void free_all() {
    for (const DataPtr& p : live_) a_->deallocate(p);
    live_.clear();
  }

  const std::vector<DataPtr>& live() const { return live_; }
  int ooms() const { return ooms_; }

 private:
  size_t pick_size() {
    int c = static_cast<int>(rng_() % 100);
    if (c < 60) return 1 + rng_() % (64 * KiB);
    if (c < 85) return 64 * KiB + rng_() % (2 * MiB);
    return 2 * MiB + rng_() % (30 * MiB);
  }

  FakeAllocator& a_;
  std::mt19937_64 rng_;
  std::vector<DataPtr> live_;
  int ooms_ = 0;
};

void check_live_blocks(FakeAllocator& a, const std::vector<DataPtr>& live) {
  Snapshot snap = a->snapshot();
  std::map<uint64_t, BlockSnapshot> blocks;
  for (const auto& seg : snap.segments)
    for (const auto& b : seg.blocks) blocks[b.address] = b;
  std::set<uint64_t> seen;
  for (const DataPtr& p : live) {
    auto it = blocks.find(addr(p));
    ASSERT_NE(it, blocks.end()) << "a live allocation is not in the snapshot";
    EXPECT_EQ(it->second.state, BlockState::active_allocated);
    EXPECT_EQ(it->second.requested_size, p.size);
    EXPECT_GE(it->second.size, p.size);
    EXPECT_TRUE(seen.insert(addr(p)).second) << "two live allocations share an address";
  }
  DeviceStats s = a->stats();
  EXPECT_EQ(static_cast<size_t>(all(s.allocation).current), live.size());
  EXPECT_EQ(static_cast<int64_t>(a.device->bytes_in_use()), all(s.reserved_bytes).current);
  for (const StatArray* arr : {&s.allocation, &s.allocated_bytes, &s.active, &s.reserved_bytes,
                               &s.inactive_split_bytes, &s.requested_bytes}) {
    for (const Stat& st : *arr) {
      EXPECT_EQ(st.allocated - st.freed, st.current);
      EXPECT_GE(st.peak, st.current);
      EXPECT_GE(st.current, 0);
    }
  }
}

const char* kConfigs[] = {"", "max_split_size_mb:20", "roundup_power2_divisions:4",
                          "expandable_segments:True",
                          "garbage_collection_threshold:0.6,max_split_size_mb:30"};

TEST(AllocatorStatsRandom, InvariantsHoldAfterEveryStep) {
  for (const char* c : kConfigs) {
    SCOPED_TRACE(::testing::Message() << "TL_ALLOC_CONF=" << c);
    FakeAllocator a(AllocatorConfig::parse(c), 256 * MiB);
    if (std::string_view(c).find("garbage") != std::string_view::npos) a->set_memory_fraction(0.9);
    RandomWorkload w(a, 20240611);
    for (int i = 0; i < 1500; ++i) {
      const char* op = w.step();
      SCOPED_TRACE(::testing::Message() << "step " << i << " (" << op << ")");
      expect_stats_match_snapshot(*a.alloc);
      check_live_blocks(a, w.live());
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GT(w.ooms(), 0) << "the workload should reach the capacity";
    EXPECT_GT(a->stats().num_alloc_retries, 0);
    w.free_all();
    a->empty_cache();
    DeviceStats s = a->stats();
    EXPECT_EQ(all(s.active).current, 0);
    EXPECT_EQ(all(s.reserved_bytes).current, 0);
    EXPECT_EQ(a.device->bytes_in_use(), 0u);
    EXPECT_EQ(a.device->live_events(), 0u);
  }
}

void expect_replayed(const DeviceStats& replayed, const DeviceStats& actual) {
  EXPECT_EQ(replayed.allocation, actual.allocation);
  EXPECT_EQ(replayed.allocated_bytes, actual.allocated_bytes);
  EXPECT_EQ(replayed.requested_bytes, actual.requested_bytes);
  EXPECT_EQ(replayed.active, actual.active);
  EXPECT_EQ(replayed.active_bytes, actual.active_bytes);
  EXPECT_EQ(replayed.segment, actual.segment);
  EXPECT_EQ(replayed.reserved_bytes, actual.reserved_bytes);
  EXPECT_EQ(replayed.inactive_split, actual.inactive_split);
  EXPECT_EQ(replayed.inactive_split_bytes, actual.inactive_split_bytes);
  EXPECT_EQ(replayed.num_ooms, actual.num_ooms);
  EXPECT_EQ(replayed.num_alloc_retries, actual.num_alloc_retries);
  EXPECT_EQ(replayed.num_device_alloc, actual.num_device_alloc);
  EXPECT_EQ(replayed.num_device_free, actual.num_device_free);
}

TEST(AllocatorStatsReplay, EventsRebuildTheStatistics) {
  for (const char* c : kConfigs) {
    SCOPED_TRACE(::testing::Message() << "TL_ALLOC_CONF=" << c);
    FakeAllocator a(AllocatorConfig::parse(c), 256 * MiB);
    if (std::string_view(c).find("garbage") != std::string_view::npos) a->set_memory_fraction(0.9);
    CollectingSink sink;
    StatsReplayer replayer;
    std::set<uint64_t> requested;  // blocks between free_requested and free_completed
    std::map<K, int> kinds;
    RandomWorkload w(a, 7);
    const auto device = a->device().event_id();
    auto check = [&](const char* op, int i) {
      SCOPED_TRACE(::testing::Message() << "step " << i << " (" << op << ")");
      // Stats are read after the events of the operation; the sink never calls the allocator.
      DeviceStats actual = a->stats();
      uint64_t last_seq = 0;
      for (const auto& e : sink.take()) {
        EXPECT_EQ(e.device, device);
        EXPECT_GE(e.seq, last_seq);
        last_seq = e.seq;
        ++kinds[e.kind];
        if (e.kind == K::free_requested) {
          EXPECT_TRUE(requested.insert(e.block.addr).second);
        }
        if (e.kind == K::free_completed) {
          EXPECT_EQ(requested.erase(e.block.addr), 1u);
        }
        replayer.on_event(e);
      }
      expect_replayed(replayer.stats(device), actual);
    };
    for (int i = 0; i < 1500; ++i) {
      const char* op = w.step();
      check(op, i);
      if (::testing::Test::HasFailure()) return;
    }
    w.free_all();
    a->empty_cache();
    check("free_all + empty_cache", -1);
    EXPECT_TRUE(requested.empty());
    EXPECT_GT(kinds[K::alloc], 100);
    EXPECT_GT(kinds[K::oom], 0);
    EXPECT_GT(kinds[K::alloc_retry], 0);
    EXPECT_GT(kinds[K::empty_cache], 0);
    bool expandable = std::string_view(c).find("expandable") != std::string_view::npos;
    EXPECT_GT(kinds[expandable ? K::segment_unmap : K::segment_free], 0);
  }
}

TEST(AllocatorStatsThreads, HammerFromSixThreads) {
  FakeAllocator a({}, size_t{8} << 30);
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&a, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<DataPtr> live;
      for (int i = 0; i < 3000; ++i) {
        int op = static_cast<int>(rng() % 10);
        if (op < 5 || live.empty()) {
          size_t size = rng() % 4 == 0 ? 1 + rng() % (8 * MiB) : 1 + rng() % (32 * KiB);
          live.push_back(a->allocate(size, static_cast<StreamId>(t % 3)));
        } else if (op < 9) {
          size_t j = rng() % live.size();
          a->deallocate(live[j]);
          live[j] = live.back();
          live.pop_back();
        } else {
          a->record_stream(live[rng() % live.size()], static_cast<StreamId>(3 + t));
          a.device->complete_all();
        }
      }
      for (const DataPtr& p : live) a->deallocate(p);
    });
  }
  for (auto& th : threads) th.join();
  a->synchronize();
  DeviceStats s = a->stats();
  EXPECT_EQ(all(s.allocation).current, 0);
  EXPECT_EQ(all(s.allocated_bytes).current, 0);
  EXPECT_EQ(all(s.active).current, 0);
  EXPECT_EQ(all(s.requested_bytes).current, 0);
  EXPECT_GT(all(s.allocation).allocated, kThreads * 1000);
  expect_stats_match_snapshot(*a.alloc);
  a->empty_cache();
  s = a->stats();
  EXPECT_EQ(all(s.reserved_bytes).current, 0);
  EXPECT_EQ(all(s.segment).current, 0);
  EXPECT_EQ(a.device->bytes_in_use(), 0u);
}

}  // namespace
}  // namespace tl::memory
