// Layout rules of the caching allocator on the fake device: every expected layout below is
// derived by hand from the policy in docs/allocator.md, not from the allocator's output.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "allocator_test_util.h"

namespace tl::memory {
namespace {

using namespace testing;  // NOLINT
using State = BlockState;
using Pool = tidemark::events::Pool;

// (offset from the segment start, size, state)
using Layout = std::vector<std::tuple<uint64_t, size_t, State>>;

void expect_layout(const SegmentSnapshot& seg, const Layout& expected) {
  ASSERT_EQ(seg.blocks.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "block " << i);
    EXPECT_EQ(seg.blocks[i].address - seg.address, std::get<0>(expected[i]));
    EXPECT_EQ(seg.blocks[i].size, std::get<1>(expected[i]));
    EXPECT_EQ(seg.blocks[i].state, std::get<2>(expected[i]));
  }
}

AllocatorConfig conf(const char* s) {
  return AllocatorConfig::parse(s);
}

TEST(CachingAllocatorRounding, RoundsTo512Bytes) {
  AllocatorConfig c;
  EXPECT_EQ(CachingAllocator::round_size(1, c), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512, c), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513, c), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1200, c), 1536u);
  EXPECT_EQ(CachingAllocator::round_size(MiB, c), MiB);
  EXPECT_EQ(CachingAllocator::round_size(5 * MiB + 1, c), 5 * MiB + 512);
}

TEST(CachingAllocatorRounding, PowerOfTwoDivisions) {
  AllocatorConfig c = conf("roundup_power2_divisions:4");
  // At or below 512 x 4 bytes plain 512 B rounding applies.
  EXPECT_EQ(CachingAllocator::round_size(1200, c), 1536u);
  EXPECT_EQ(CachingAllocator::round_size(2048, c), 2048u);
  // [2048, 4096) in steps of 512; [4096, 8192) in steps of 1024; [8192, 16384) of 2048.
  EXPECT_EQ(CachingAllocator::round_size(2049, c), 2560u);
  EXPECT_EQ(CachingAllocator::round_size(5000, c), 5120u);
  EXPECT_EQ(CachingAllocator::round_size(9000, c), 10240u);
  EXPECT_EQ(CachingAllocator::round_size(8192, c), 8192u);  // powers of two stay
  // 1 MiB + 1: steps of 256 KiB.
  EXPECT_EQ(CachingAllocator::round_size(MiB + 1, c), MiB + 256 * KiB);
  // 1200 MiB with 4 divisions: 1024 MiB + k x 256 MiB -> 1280 MiB.
  EXPECT_EQ(CachingAllocator::round_size(1200 * MiB, c), 1280 * MiB);
}

TEST(CachingAllocatorRounding, DivisionsPerInterval) {
  // Below 512 MiB: 1 division (plain 512 B rounding); [512 MiB, 1 GiB): 2; from 1 GiB: 8.
  AllocatorConfig c = conf("roundup_power2_divisions:[256:1,512:2,>:8]");
  EXPECT_EQ(CachingAllocator::round_size(300 * MiB + 1, c), 300 * MiB + 512);
  EXPECT_EQ(CachingAllocator::round_size(600 * MiB, c), 768 * MiB);
  EXPECT_EQ(CachingAllocator::round_size(1100 * MiB, c), 1152 * MiB);
}

TEST(CachingAllocatorRounding, SegmentSizes) {
  EXPECT_EQ(CachingAllocator::allocation_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::allocation_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::allocation_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::allocation_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::allocation_size(11 * MiB + 512), 12 * MiB);
}

TEST(CachingAllocatorLayout, SmallRequestsShareOne2MiBSegment) {
  FakeAllocator a;
  DataPtr p = a->allocate(1000);
  DataPtr q = a->allocate(3000);
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  const SegmentSnapshot& seg = s.segments[0];
  EXPECT_EQ(seg.address, FakeDevice::kFirstAddress);
  EXPECT_EQ(seg.total_size, 2 * MiB);
  EXPECT_EQ(seg.segment_type(), "small");
  EXPECT_EQ(seg.allocated_size, 4096u);
  EXPECT_EQ(seg.requested_size, 4000u);
  expect_layout(seg, {{0, 1024, State::active_allocated},
                      {1024, 3072, State::active_allocated},
                      {4096, 2 * MiB - 4096, State::inactive}});
  EXPECT_EQ(seg.blocks[0].requested_size, 1000u);
  EXPECT_EQ(addr(p), seg.address);
  EXPECT_EQ(addr(q), seg.address + 1024);
  EXPECT_EQ(p.size, 1000u);
  EXPECT_EQ(p.owner, a.alloc.get());
  EXPECT_EQ(a.device->counters().raw_alloc, 1);
  a->deallocate(p);
  a->deallocate(q);
}

TEST(CachingAllocatorLayout, ExactlyOneMiBIsSmall) {
  FakeAllocator a;
  DataPtr p = a->allocate(MiB);
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].pool, Pool::small);
  expect_layout(s.segments[0], {{0, MiB, State::active_allocated}, {MiB, MiB, State::inactive}});
  DataPtr q = a->allocate(MiB + 1);  // large pool: its own 20 MiB segment
  s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[1].pool, Pool::large);
  EXPECT_EQ(s.segments[1].total_size, 20 * MiB);
  expect_layout(s.segments[1], {{0, MiB + 512, State::active_allocated},
                                {MiB + 512, 19 * MiB - 512, State::inactive}});
  a->deallocate(p);
  a->deallocate(q);
}

TEST(CachingAllocatorLayout, LargeRequestsUnder10MiBGet20MiBSegments) {
  FakeAllocator a;
  DataPtr p = a->allocate(5 * MiB);
  DataPtr q = a->allocate(2 * MiB);  // fits the 15 MiB remainder: same segment
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].total_size, 20 * MiB);
  EXPECT_EQ(s.segments[0].segment_type(), "large");
  expect_layout(s.segments[0], {{0, 5 * MiB, State::active_allocated},
                                {5 * MiB, 2 * MiB, State::active_allocated},
                                {7 * MiB, 13 * MiB, State::inactive}});
  a->deallocate(p);
  a->deallocate(q);
}

TEST(CachingAllocatorLayout, RequestsFrom10MiBAreRoundedTo2MiB) {
  FakeAllocator a;
  DataPtr p = a->allocate(11 * MiB + 1);  // block 11 MiB + 512, segment 12 MiB
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].total_size, 12 * MiB);
  // The remainder (1 MiB - 512) is not more than 1 MiB: no split, the block is the segment.
  expect_layout(s.segments[0], {{0, 12 * MiB, State::active_allocated}});
  EXPECT_EQ(s.segments[0].blocks[0].requested_size, 11 * MiB + 1);
  DeviceStats st = a->stats();
  EXPECT_EQ(all(st.allocated_bytes).current, int64_t(12 * MiB));
  EXPECT_EQ(all(st.requested_bytes).current, int64_t(11 * MiB + 1));
  a->deallocate(p);
}

TEST(CachingAllocatorLayout, SmallPoolSplitsDownTo512Bytes) {
  FakeAllocator a;
  DataPtr p1 = a->allocate(MiB);
  DataPtr p2 = a->allocate(MiB - 1024);  // leaves 1024 bytes: split (>= 512)
  DataPtr p3 = a->allocate(1);           // 512 of the 1024: split again
  DataPtr p4 = a->allocate(512);         // the last 512: no remainder
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  expect_layout(s.segments[0], {{0, MiB, State::active_allocated},
                                {MiB, MiB - 1024, State::active_allocated},
                                {2 * MiB - 1024, 512, State::active_allocated},
                                {2 * MiB - 512, 512, State::active_allocated}});
  DataPtr p5 = a->allocate(600);  // nothing left: a second segment
  EXPECT_EQ(a->snapshot().segments.size(), 2u);
  for (const DataPtr& p : {p1, p2, p3, p4, p5}) a->deallocate(p);
}

TEST(CachingAllocatorLayout, LargePoolSplitsOnlyForMoreThan1MiB) {
  FakeAllocator a;
  DataPtr p = a->allocate(5 * MiB);
  DataPtr q = a->allocate(14 * MiB);  // 15 MiB free: remainder exactly 1 MiB, no split
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  expect_layout(s.segments[0], {{0, 5 * MiB, State::active_allocated},
                                {5 * MiB, 15 * MiB, State::active_allocated}});
  EXPECT_EQ(all(a->stats().allocated_bytes).current, int64_t(20 * MiB));
  a->deallocate(q);
  DataPtr r = a->allocate(14 * MiB - 512);  // remainder 1 MiB + 512: split
  expect_layout(a->snapshot().segments[0], {{0, 5 * MiB, State::active_allocated},
                                            {5 * MiB, 14 * MiB - 512, State::active_allocated},
                                            {19 * MiB - 512, MiB + 512, State::inactive}});
  a->deallocate(p);
  a->deallocate(r);
}

TEST(CachingAllocatorLayout, BestFitTakesSmallestBlockThenLowestAddress) {
  FakeAllocator a;
  DataPtr h1 = a->allocate(4096);
  DataPtr k1 = a->allocate(512);
  DataPtr h2 = a->allocate(8192);
  DataPtr k2 = a->allocate(512);
  DataPtr h3 = a->allocate(2048);
  DataPtr k3 = a->allocate(512);
  DataPtr h4 = a->allocate(4096);
  DataPtr k4 = a->allocate(512);
  uintptr_t base = addr(h1);
  // Holes: 4096 @0, 8192 @4608, 2048 @13312, 4096 @15872, and the tail.
  for (const DataPtr& p : {h1, h2, h3, h4}) a->deallocate(p);
  DataPtr x = a->allocate(2000);  // 2048: exactly hole 3
  EXPECT_EQ(addr(x), base + 13312);
  DataPtr y = a->allocate(3000);  // 3072: smallest fit is 4096; the lower of the two
  EXPECT_EQ(addr(y), base);
  DataPtr z = a->allocate(4096);  // 4096: the other 4096 hole
  EXPECT_EQ(addr(z), base + 15872);
  DataPtr w = a->allocate(5000);  // 5120: the 8192 hole, not the tail
  EXPECT_EQ(addr(w), base + 4608);
  expect_layout(a->snapshot().segments[0], {{0, 3072, State::active_allocated},
                                            {3072, 1024, State::inactive},
                                            {4096, 512, State::active_allocated},
                                            {4608, 5120, State::active_allocated},
                                            {9728, 3072, State::inactive},
                                            {12800, 512, State::active_allocated},
                                            {13312, 2048, State::active_allocated},
                                            {15360, 512, State::active_allocated},
                                            {15872, 4096, State::active_allocated},
                                            {19968, 512, State::active_allocated},
                                            {20480, 2 * MiB - 20480, State::inactive}});
  for (const DataPtr& p : {k1, k2, k3, k4, x, y, z, w}) a->deallocate(p);
}

TEST(CachingAllocatorLayout, FreeMergesWithBothNeighbours) {
  FakeAllocator a;
  DataPtr p = a->allocate(4096);
  DataPtr q = a->allocate(4096);
  DataPtr r = a->allocate(4096);
  a->deallocate(p);
  a->deallocate(r);  // merges with the tail
  expect_layout(a->snapshot().segments[0], {{0, 4096, State::inactive},
                                            {4096, 4096, State::active_allocated},
                                            {8192, 2 * MiB - 8192, State::inactive}});
  DeviceStats st = a->stats();
  EXPECT_EQ(small(st.inactive_split).current, 2);
  EXPECT_EQ(small(st.inactive_split_bytes).current, int64_t(2 * MiB - 4096));
  a->deallocate(q);  // merges with both: the segment is one free block again
  expect_layout(a->snapshot().segments[0], {{0, 2 * MiB, State::inactive}});
  st = a->stats();
  EXPECT_EQ(all(st.inactive_split).current, 0);
  EXPECT_EQ(all(st.inactive_split_bytes).current, 0);
  EXPECT_EQ(all(st.reserved_bytes).current, int64_t(2 * MiB));
}

TEST(CachingAllocatorLayout, MaxSplitSizeKeepsOversizeBlocksWhole) {
  FakeAllocator a(conf("max_split_size_mb:40"));
  DataPtr big = a->allocate(50 * MiB);
  a->deallocate(big);
  // A request under max_split_size never takes a block of >= max_split_size.
  DataPtr p = a->allocate(10 * MiB);
  EXPECT_EQ(a.device->counters().raw_alloc, 2);
  EXPECT_NE(addr(p), addr(big));
  // A request >= max_split_size takes a cached block smaller than request + 20 MiB, unsplit.
  DataPtr q = a->allocate(45 * MiB);
  EXPECT_EQ(addr(q), addr(big));
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 2u);
  expect_layout(s.segments[0], {{0, 50 * MiB, State::active_allocated}});
  DeviceStats st = a->stats();
  EXPECT_EQ(st.oversize_allocations.current, 1);
  EXPECT_EQ(st.oversize_segments.current, 1);
  EXPECT_EQ(st.max_split_size, int64_t(40 * MiB));
  a->deallocate(q);
  DataPtr huge = a->allocate(70 * MiB);
  a->deallocate(huge);
  DataPtr r = a->allocate(30 * MiB + 1);  // under 40: new 32 MiB segment, not 50 or 70
  EXPECT_EQ(a.device->counters().raw_alloc, 4);
  a->deallocate(r);
  a->deallocate(p);
}

TEST(CachingAllocatorLayout, OversizeRequestSkipsMuchLargerBlock) {
  FakeAllocator a(conf("max_split_size_mb:40"));
  DataPtr huge = a->allocate(70 * MiB);
  a->deallocate(huge);
  DataPtr p = a->allocate(42 * MiB);  // 70 >= 42 + 20: a new segment
  EXPECT_NE(addr(p), addr(huge));
  EXPECT_EQ(a.device->counters().raw_alloc, 2);
  DataPtr q = a->allocate(52 * MiB);  // 70 < 52 + 20: takes it whole
  EXPECT_EQ(addr(q), addr(huge));
  a->deallocate(p);
  a->deallocate(q);
}

TEST(CachingAllocatorLayout, MaxNonSplitRounding) {
  FakeAllocator a(conf("max_split_size_mb:40,max_non_split_rounding_mb:40"));
  DataPtr huge = a->allocate(70 * MiB);
  a->deallocate(huge);
  DataPtr p = a->allocate(42 * MiB);  // 70 < 42 + 40
  EXPECT_EQ(addr(p), addr(huge));
  a->deallocate(p);
}

TEST(CachingAllocatorStreams, EachStreamHasItsOwnBlocks) {
  FakeAllocator a;
  DataPtr p = a->allocate(1000, 1);
  a->deallocate(p);
  DataPtr q = a->allocate(1000, 2);  // stream 1's cached block is not reused
  EXPECT_EQ(a.device->counters().raw_alloc, 2);
  DataPtr r = a->allocate(1000, 1);
  EXPECT_EQ(addr(r), addr(p));
  Snapshot s = a->snapshot();
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[0].stream, 1u);
  EXPECT_EQ(s.segments[1].stream, 2u);
  a->deallocate(q);
  a->deallocate(r);
}

TEST(CachingAllocatorStreams, RecordStreamDefersReuseUntilEventCompletes) {
  FakeAllocator a;
  CollectingSink sink;
  DataPtr p = a->allocate(4096);
  a->record_stream(p, 7);
  a->record_stream(p, 0);  // its own stream: ignored
  sink.take();
  a->deallocate(p);
  auto events = sink.take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, tidemark::events::Kind::free_requested);
  auto pending = a.device->pending_events();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].second, 7u);

  DeviceStats st = a->stats();
  EXPECT_EQ(all(st.allocated_bytes).current, 0);  // allocated drops at free_requested
  EXPECT_EQ(all(st.active_bytes).current, 4096);  // active waits for free_completed
  Snapshot s = a->snapshot();
  expect_layout(s.segments[0],
                {{0, 4096, State::active_pending_free}, {4096, 2 * MiB - 4096, State::inactive}});
  EXPECT_EQ(s.segments[0].allocated_size, 0u);
  EXPECT_EQ(s.segments[0].active_size, 4096u);

  DataPtr q = a->allocate(4096);  // the event has not completed: not p's block
  EXPECT_EQ(addr(q), addr(p) + 4096);
  a.device->complete_event(pending[0].first);
  sink.take();
  DataPtr r = a->allocate(4096);  // completed at the start of this malloc: p's block again
  EXPECT_EQ(addr(r), addr(p));
  events = sink.take();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, tidemark::events::Kind::free_completed);
  EXPECT_EQ(events[0].block.addr, addr(p));
  EXPECT_EQ(events[1].kind, tidemark::events::Kind::alloc);
  EXPECT_EQ(a.device->live_events(), 0u);
  a->deallocate(q);
  a->deallocate(r);
}

TEST(CachingAllocatorStreams, BlockUsedByTwoStreamsWaitsForBoth) {
  FakeAllocator a;
  DataPtr p = a->allocate(4096);
  a->record_stream(p, 1);
  a->record_stream(p, 2);
  a->deallocate(p);
  auto pending = a.device->pending_events();
  ASSERT_EQ(pending.size(), 2u);
  a.device->complete_event(pending[0].first);
  DataPtr q = a->allocate(4096);
  EXPECT_NE(addr(q), addr(p));
  EXPECT_EQ(a->snapshot().segments[0].blocks[0].state, State::active_pending_free);
  a.device->complete_event(pending[1].first);
  DataPtr r = a->allocate(4096);
  EXPECT_EQ(addr(r), addr(p));
  a->deallocate(q);
  a->deallocate(r);
}

TEST(CachingAllocatorStreams, SynchronizeCompletesDeferredFrees) {
  FakeAllocator a;
  DataPtr p = a->allocate(4096);
  a->record_stream(p, 3);
  a->deallocate(p);
  a->synchronize();
  EXPECT_EQ(all(a->stats().active).current, 0);
  EXPECT_EQ(a->stats().num_sync_all_streams, 1);
  EXPECT_EQ(a.device->live_events(), 0u);
  expect_layout(a->snapshot().segments[0], {{0, 2 * MiB, State::inactive}});
}

TEST(CachingAllocatorEvents, NormalFreeEmitsRequestedThenCompleted) {
  FakeAllocator a;
  CollectingSink sink;
  DataPtr p = a->allocate(3000, 5);
  a->deallocate(p);
  auto events = sink.take();
  using K = tidemark::events::Kind;
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, K::segment_alloc);
  EXPECT_EQ(events[0].block.size, 2 * MiB);
  EXPECT_EQ(events[0].block.addr, FakeDevice::kFirstAddress);
  EXPECT_EQ(events[1].kind, K::alloc);
  EXPECT_EQ(events[1].block.size, 3072u);
  EXPECT_EQ(events[1].block.requested_size, 3000u);
  EXPECT_EQ(events[1].block.stream, 5u);
  EXPECT_EQ(events[1].block.segment, FakeDevice::kFirstAddress);
  EXPECT_EQ(events[1].block.pool, tidemark::events::Pool::small);
  EXPECT_EQ(events[2].kind, K::free_requested);
  EXPECT_EQ(events[3].kind, K::free_completed);
  for (const auto& e : events) {
    EXPECT_EQ(e.device.type, tidemark::events::DeviceType::cuda);
    EXPECT_EQ(e.device.index, 0);
  }
  EXPECT_LT(events[2].seq, events[3].seq);
}

TEST(CachingAllocatorApi, ZeroBytesGivesNullPointer) {
  FakeAllocator a;
  DataPtr p = a->allocate(0);
  EXPECT_EQ(p.ptr, nullptr);
  a->deallocate(p);
  EXPECT_EQ(a.device->counters().raw_alloc, 0);
}

TEST(CachingAllocatorApi, RecordStreamOnFreedBlockIsAnError) {
  FakeAllocator a;
  DataPtr p = a->allocate(100);
  a->deallocate(p);
  EXPECT_THROW(a->record_stream(p, 1), tl::Error);
}

}  // namespace
}  // namespace tl::memory

// ---- What a replay of a trace relies on (profiler/replay) ----------------------------------

namespace tl::memory {
namespace {

// An allocator's own sink sees its events, and the installed sinks do not.
TEST(CachingAllocatorReplayHooks, OwnSinkTakesTheEventsAlone) {
  CollectingSink installed;
  struct Own : tidemark::events::Sink {
    std::vector<tidemark::events::Kind> kinds;
    void on_event(const tidemark::events::Event& e) noexcept override { kinds.push_back(e.kind); }
  } own;
  FakeAllocator a;
  a->set_event_sink(&own);
  a->deallocate(a->allocate(1000));
  using K = tidemark::events::Kind;
  EXPECT_EQ(own.kinds,
            (std::vector<K>{K::segment_alloc, K::alloc, K::free_requested, K::free_completed}));
  EXPECT_TRUE(installed.take().empty());
  a->set_event_sink(nullptr);
  a->deallocate(a->allocate(1000));  // from the cache: alloc, free_requested, free_completed
  EXPECT_EQ(installed.take().size(), 3u);
  EXPECT_EQ(own.kinds.size(), 4u);
}

// By hand: a 2 MiB small segment holding 1 KiB and 3 KiB blocks has one cached block of
// 2 MiB - 4 KiB; freeing the 3 KiB block merges it into 2 MiB - 1 KiB.
TEST(CachingAllocatorReplayHooks, LargestCachedBlock) {
  FakeAllocator a;
  EXPECT_EQ(a->largest_cached_block(), 0u);
  DataPtr p = a->allocate(1000);
  DataPtr q = a->allocate(3000);
  EXPECT_EQ(a->largest_cached_block(), 2 * MiB - 4096);
  a->deallocate(q);
  EXPECT_EQ(a->largest_cached_block(), 2 * MiB - 1024);
  a->deallocate(p);
  EXPECT_EQ(a->largest_cached_block(), 2 * MiB);
}

// The preferred address is handed out when free; when it overlaps a live segment the next
// fresh one is, after the highest handed out; a hint is used (or dropped) once.
TEST(CachingAllocatorReplayHooks, FakeDeviceHandsOutThePreferredAddress) {
  FakeDevice d;
  const uintptr_t want = FakeDevice::kFirstAddress + 7 * (size_t{1} << 30);
  d.prefer_address(want);
  void* a = d.raw_alloc(2 * MiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a), want);
  d.prefer_address(want + MiB);  // inside `a`: refused
  void* b = d.raw_alloc(2 * MiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b), FakeDevice::next_address(want, 2 * MiB));
  void* c = d.raw_alloc(2 * MiB);  // the hint was spent on `b`
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c),
            FakeDevice::next_address(reinterpret_cast<uintptr_t>(b), 2 * MiB));
  EXPECT_EQ(d.next_event_id(), 1u);
  d.record_event(0);
  EXPECT_EQ(d.next_event_id(), 2u);
  for (void* x : {a, b, c}) d.raw_free(x, 2 * MiB);
}

}  // namespace
}  // namespace tl::memory
