// Running out of memory: the OOM error and recovery, the free-cache-and-retry step, the memory
// fraction, garbage collection, empty_cache and expandable segments, on the fake device.
#include <gtest/gtest.h>

#include <string>

#include "allocator_test_util.h"

namespace tl::memory {
namespace {

using namespace testing;  // NOLINT
using K = tidemark::events::Kind;
using State = BlockState;

AllocatorConfig conf(const char* s) {
  return AllocatorConfig::parse(s);
}

TEST(CachingAllocatorOom, MessageNumbersAndRecovery) {
  FakeAllocator a({}, 64 * MiB);
  CollectingSink sink;
  DataPtr p = a->allocate(40 * MiB);
  bool thrown = false;
  try {
    a->allocate(30 * MiB);
  } catch (const tl::OutOfMemoryError& e) {
    thrown = true;
    EXPECT_EQ(std::string(e.what()),
              "Out of memory on device cuda:0. Tried to allocate 30.00 MiB. Device cuda:0 has a "
              "total capacity of 64.00 MiB of which 24.00 MiB is free. Of the allocated memory "
              "40.00 MiB is allocated by tensorlib, and 0 bytes is reserved by tensorlib but "
              "unallocated. If reserved but unallocated memory is large try setting "
              "TL_ALLOC_CONF=expandable_segments:True to avoid fragmentation.");
    EXPECT_EQ(e.requested_bytes(), 30 * MiB);
    EXPECT_EQ(e.allocation_bytes(), 30 * MiB);
    EXPECT_EQ(e.device_total(), 64 * MiB);
    EXPECT_EQ(e.device_free(), 24 * MiB);
    EXPECT_EQ(e.allocated(), 40 * MiB);
    EXPECT_EQ(e.reserved(), 40 * MiB);
    ASSERT_EQ(e.snapshot().segments.size(), 1u);
    EXPECT_EQ(e.snapshot().segments[0].total_size, 40 * MiB);
  }
  EXPECT_TRUE(thrown);
  DeviceStats st = a->stats();
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.num_alloc_retries, 1);
  auto events = sink.take();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].kind, K::alloc_retry);
  EXPECT_EQ(events.back().kind, K::oom);
  EXPECT_EQ(events.back().allocator.requested_size, 30 * MiB);
  EXPECT_EQ(events.back().allocator.device_free, 24 * MiB);
  EXPECT_EQ(events.back().allocator.allocated, 40 * MiB);

  // Free and carry on: the cached 40 MiB block serves the same request.
  a->deallocate(p);
  DataPtr q = a->allocate(30 * MiB);
  EXPECT_EQ(addr(q), addr(p));
  a->deallocate(q);
  expect_stats_match_snapshot(*a.alloc);
}

TEST(CachingAllocatorOom, IsATlError) {
  FakeAllocator a({}, 4 * MiB);
  EXPECT_THROW(a->allocate(10 * MiB), tl::Error);
  EXPECT_THROW(a->allocate(10 * MiB), tl::OutOfMemoryError);
  EXPECT_EQ(a->stats().num_ooms, 2);
}

TEST(CachingAllocatorOom, ReservedButUnallocatedIsReported) {
  FakeAllocator a({}, 30 * MiB);
  DataPtr p = a->allocate(5 * MiB);  // 20 MiB segment: 15 MiB reserved but unallocated
  try {
    a->allocate(16 * MiB);  // does not fit the 15 MiB block; 20 + 16 > 30
    FAIL() << "expected OutOfMemoryError";
  } catch (const tl::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("Tried to allocate 16.00 MiB. Device cuda:0 has a total "
                                         "capacity of 30.00 MiB of which 10.00 MiB is free. Of "
                                         "the allocated memory 5.00 MiB is allocated by "
                                         "tensorlib, and 15.00 MiB is reserved by tensorlib but "
                                         "unallocated."),
              std::string::npos)
        << e.what();
  }
  a->deallocate(p);
}

TEST(CachingAllocatorOom, RetryReleasesCachedSegments) {
  FakeAllocator a({}, 64 * MiB);
  CollectingSink sink;
  DataPtr p = a->allocate(40 * MiB, 1);
  a->deallocate(p);  // cached on stream 1, useless to stream 0
  sink.take();
  DataPtr q = a->allocate(30 * MiB, 0);  // 40 + 30 > 64: free the cache, retry
  DeviceStats st = a->stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(all(st.reserved_bytes).current, int64_t(30 * MiB));
  auto c = a.device->counters();
  EXPECT_EQ(c.raw_alloc, 2);
  EXPECT_EQ(c.raw_free, 1);
  EXPECT_EQ(c.failed_alloc, 1);
  auto events = sink.take();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, K::segment_free);
  EXPECT_EQ(events[0].block.size, 40 * MiB);
  EXPECT_EQ(events[1].kind, K::alloc_retry);
  EXPECT_EQ(events[1].allocator.released, 40 * MiB);
  EXPECT_EQ(events[2].kind, K::segment_alloc);
  EXPECT_EQ(events[3].kind, K::alloc);
  a->deallocate(q);
}

TEST(CachingAllocatorOom, InjectedDeviceFailureIsRetriedOnce) {
  FakeAllocator a;
  a.device->fail_next_allocs(1);
  DataPtr p = a->allocate(100);
  EXPECT_EQ(a->stats().num_alloc_retries, 1);
  a.device->fail_next_allocs(2);
  EXPECT_THROW(a->allocate(3 * MiB), tl::OutOfMemoryError);
  a->deallocate(p);
}

TEST(CachingAllocatorOom, MaxSplitSizeReleasesOversizeBlockBeforeRetry) {
  FakeAllocator a(conf("max_split_size_mb:40"), 100 * MiB);
  DataPtr big = a->allocate(90 * MiB);
  a->deallocate(big);
  // 42 MiB cannot take the cached 90 MiB block (90 >= 42 + 20), and 90 + 42 > 100: step 6
  // releases the oversize block without a full retry.
  DataPtr p = a->allocate(42 * MiB);
  DeviceStats st = a->stats();
  EXPECT_EQ(st.num_alloc_retries, 0);
  EXPECT_EQ(st.num_sync_all_streams, 0);
  EXPECT_EQ(a.device->counters().raw_free, 1);
  EXPECT_EQ(all(st.reserved_bytes).current, int64_t(42 * MiB));
  a->deallocate(p);
}

TEST(CachingAllocatorFraction, CapsReservedMemoryWithoutAskingTheDevice) {
  FakeAllocator a({}, 100 * MiB);
  a->set_memory_fraction(0.5);
  DataPtr p = a->allocate(30 * MiB);
  try {
    a->allocate(30 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const tl::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("of which 70.00 MiB is free. 50.00 MiB allowed; Of the "
                                         "allocated memory 30.00 MiB"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(a.device->counters().failed_alloc, 0);
  EXPECT_EQ(a.device->counters().raw_alloc, 1);
  DataPtr q = a->allocate(20 * MiB);  // 30 + 20 = 50: exactly the limit
  EXPECT_THROW(a->set_memory_fraction(1.5), tl::Error);
  a->deallocate(p);
  a->deallocate(q);
}

TEST(CachingAllocatorFraction, GarbageCollectionReleasesOldestCachedSegments) {
  // allowed = 0.8 x 100 MiB = 80 MiB; gc threshold 0.5 x 80 = 40 MiB.
  FakeAllocator a(conf("garbage_collection_threshold:0.5"), 100 * MiB);
  a->set_memory_fraction(0.8);
  DataPtr old_block = a->allocate(30 * MiB, 1);
  a->deallocate(old_block);  // cached at lookup 1
  DataPtr young = a->allocate(14 * MiB, 2);
  a->deallocate(young);  // cached at lookup 2
  // Lookup 3 misses on stream 0 with 44 MiB reserved (> 40): ages 2 and 1, average 1.5, so
  // only the 30 MiB segment goes, which is enough.
  DataPtr p = a->allocate(12 * MiB, 0);
  EXPECT_EQ(a.device->counters().raw_free, 1);
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[0].address, addr(young));
  EXPECT_EQ(s.segments[1].address, addr(p));
  EXPECT_EQ(a->stats().num_alloc_retries, 0);
  a->deallocate(p);
}

TEST(CachingAllocatorFraction, NoGarbageCollectionBelowThreshold) {
  FakeAllocator a(conf("garbage_collection_threshold:0.9"), 100 * MiB);
  a->set_memory_fraction(0.8);  // gc above 72 MiB
  DataPtr p = a->allocate(30 * MiB, 1);
  a->deallocate(p);
  DataPtr q = a->allocate(14 * MiB, 2);
  a->deallocate(q);
  DataPtr r = a->allocate(12 * MiB, 0);
  EXPECT_EQ(a.device->counters().raw_free, 0);
  EXPECT_EQ(a->snapshot().segments.size(), 3u);
  a->deallocate(r);
}

TEST(CachingAllocatorEmptyCache, ReleasesOnlySegmentsWithoutLiveBlocks) {
  FakeAllocator a;
  CollectingSink sink;
  DataPtr live = a->allocate(1000);         // small segment, stays
  DataPtr freed_small = a->allocate(1000);  // same segment, freed: segment still live
  DataPtr large = a->allocate(5 * MiB);     // 20 MiB segment
  DataPtr huge = a->allocate(16 * MiB);     // too big for the 15 MiB rest: 16 MiB segment
  DataPtr pending = a->allocate(3 * MiB);   // in `large`'s segment
  a->record_stream(pending, 4);
  for (const DataPtr& p : {freed_small, large, huge, pending}) a->deallocate(p);
  sink.take();
  a->empty_cache();  // waits for `pending`, then releases the 16 and 20 MiB segments
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].address, addr(live));
  EXPECT_EQ(s.segments[0].blocks.size(), 2u);
  DeviceStats st = a->stats();
  EXPECT_EQ(all(st.reserved_bytes).current, int64_t(2 * MiB));
  EXPECT_EQ(all(st.active).current, 1);
  EXPECT_EQ(a.device->counters().raw_free, 2);
  auto events = sink.take();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, K::free_completed);
  EXPECT_EQ(events[1].kind, K::segment_free);
  EXPECT_EQ(events[1].block.size, 16 * MiB);
  EXPECT_EQ(events[2].kind, K::segment_free);
  EXPECT_EQ(events[2].block.size, 20 * MiB);
  EXPECT_EQ(events[3].kind, K::empty_cache);
  EXPECT_EQ(events[3].allocator.released, 36 * MiB);
  a->deallocate(live);
  a->empty_cache();
  EXPECT_TRUE(a->snapshot().segments.empty());
  EXPECT_EQ(a.device->bytes_in_use(), 0u);
}

TEST(CachingAllocatorExpandable, GrowsOneSegmentInPlace) {
  FakeAllocator a(conf("expandable_segments:True"));
  CollectingSink sink;
  DataPtr p = a->allocate(5 * MiB);  // maps one 20 MiB page
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  const uint64_t base = s.segments[0].address;
  EXPECT_TRUE(s.segments[0].is_expandable);
  EXPECT_EQ(s.segments[0].total_size, 20 * MiB);
  EXPECT_EQ(addr(p), base);
  DataPtr q = a->allocate(30 * MiB);  // 15 MiB cached + one more 20 MiB page
  EXPECT_EQ(addr(q), base + 5 * MiB);
  s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].total_size, 40 * MiB);
  ASSERT_EQ(s.segments[0].blocks.size(), 3u);
  EXPECT_EQ(s.segments[0].blocks[2].address, base + 35 * MiB);
  EXPECT_EQ(s.segments[0].blocks[2].size, 5 * MiB);
  DeviceStats st = a->stats();
  EXPECT_EQ(all(st.segment).current, 1);
  EXPECT_EQ(all(st.reserved_bytes).current, int64_t(40 * MiB));
  EXPECT_EQ(all(st.inactive_split).current, 0);
  auto events = sink.take();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, K::segment_map);
  EXPECT_EQ(events[0].block.addr, base);
  EXPECT_EQ(events[0].block.size, 20 * MiB);
  EXPECT_EQ(events[2].kind, K::segment_map);
  EXPECT_EQ(events[2].block.addr, base + 20 * MiB);
  EXPECT_EQ(events[2].block.segment, base);
  EXPECT_EQ(a.device->counters().raw_alloc, 0);
  EXPECT_EQ(a.device->counters().map, 2);

  // Freeing q leaves [5 MiB, 40 MiB) cached: only the page [20, 40) lies wholly inside it.
  a->deallocate(q);
  a->empty_cache();
  s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].total_size, 20 * MiB);
  events = sink.take();
  ASSERT_EQ(events.size(), 4u);  // free_requested, free_completed, segment_unmap, empty_cache
  EXPECT_EQ(events[2].kind, K::segment_unmap);
  EXPECT_EQ(events[2].block.addr, base + 20 * MiB);
  EXPECT_EQ(events[2].block.size, 20 * MiB);
  EXPECT_EQ(all(a->stats().reserved_bytes).current, int64_t(20 * MiB));
  expect_stats_match_snapshot(*a.alloc);

  // The unmapped page is mapped again on demand, at the same address.
  DataPtr r = a->allocate(25 * MiB);
  EXPECT_EQ(addr(r), base + 5 * MiB);
  a->deallocate(r);
  a->deallocate(p);
  a->empty_cache();
  EXPECT_TRUE(a->snapshot().segments.empty());
  EXPECT_EQ(all(a->stats().segment).current, 0);
  EXPECT_EQ(a.device->bytes_in_use(), 0u);
}

TEST(CachingAllocatorExpandable, OneSegmentPerStreamAndPool) {
  FakeAllocator a(conf("expandable_segments:True"));
  DataPtr s0 = a->allocate(1000, 0);
  DataPtr l0 = a->allocate(3 * MiB, 0);
  DataPtr s1 = a->allocate(1000, 1);
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 3u);
  EXPECT_EQ(s.segments[0].total_size, 2 * MiB);  // small pages are 2 MiB
  EXPECT_EQ(s.segments[1].total_size, 20 * MiB);
  EXPECT_EQ(all(a->stats().segment).current, 3);
  expect_stats_match_snapshot(*a.alloc);
  for (const DataPtr& p : {s0, l0, s1}) a->deallocate(p);
}

TEST(CachingAllocatorExpandable, FallsBackWhenDeviceCannotMap) {
  auto dev = std::make_unique<FakeDevice>();
  dev->set_supports_expandable(false);
  FakeDevice* d = dev.get();
  CachingAllocator a(std::move(dev), conf("expandable_segments:True"));
  DataPtr p = a.allocate(5 * MiB);
  EXPECT_FALSE(a.snapshot().segments[0].is_expandable);
  EXPECT_EQ(d->counters().raw_alloc, 1);
  a.deallocate(p);
}

TEST(CachingAllocatorExpandable, OomWhenPagesRunOut) {
  FakeAllocator a(conf("expandable_segments:True"), 50 * MiB);
  DataPtr p = a->allocate(30 * MiB);                          // two 20 MiB pages
  EXPECT_THROW(a->allocate(30 * MiB), tl::OutOfMemoryError);  // needs 20 MiB more: 60 > 50
  a->deallocate(p);
  DataPtr q = a->allocate(35 * MiB);  // the mapped 40 MiB serve it
  EXPECT_EQ(addr(q), addr(p));
  a->deallocate(q);
}

}  // namespace
}  // namespace tl::memory
