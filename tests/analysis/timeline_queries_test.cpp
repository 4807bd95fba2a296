// The queries a timeline viewer makes (profiler/analysis/steps.h sync_events,
// allocator_state.h, bands.h, timeline() with curves_only) on hand-built traces
// (trace_builder.h), against values worked out by hand and against live_allocations().
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <tensorlib/tensorlib.h>

#include "../../samples/mlp.h"

#include "live_fold_check.h"
#include "profiler/analysis/allocator_state.h"
#include "profiler/analysis/bands.h"
#include "profiler/analysis/follow.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/record/recorder.h"
#include "trace_builder.h"

namespace {

namespace an = tidemark::analysis;
namespace ev = tidemark::events;
using analysis_test::Builder;
using analysis_test::remove_trace;
using analysis_test::temp_path;

using TimelineQueries = analysis_test::BaseTraceTest;

TEST_F(TimelineQueries, SyncEventsComeOneByOneWithTheirStacks) {
  an::Trace t = an::Trace::open(path_);
  const auto all = an::sync_events(t, 0, UINT64_MAX);
  ASSERT_EQ(all.size(), 3u);  // t=2500, 2600 @stack2, t=6500 @stack1
  EXPECT_EQ(all[0].ts, 2500u);
  EXPECT_EQ(all[1].ts, 2600u);
  EXPECT_EQ(all[2].ts, 6500u);
  EXPECT_EQ(all[0].kind, "item");
  EXPECT_EQ(all[0].duration_ns, 100u);
  EXPECT_EQ(all[0].stack_id, 2u);
  EXPECT_EQ(all[2].stack_id, 1u);
  EXPECT_EQ(all[0].site, "0xb1");
  EXPECT_LT(all[0].seq, all[1].seq);
  EXPECT_EQ(all[0].device_id, t.devices()[0].id);
  // A range keeps its ends.
  const auto some = an::sync_events(t, 2600, 6500);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].ts, 2600u);
  EXPECT_TRUE(an::sync_events(t, 7000, 9000).empty());
}

TEST_F(TimelineQueries, AllocatorStateHoldsTheSegmentAndItsLiveBlocks) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  // At t=4500: A (0x10000, 1024), B (0x10400, 2048), C (0x10c00, 512) in the 1 MiB segment.
  an::AllocatorState s = an::allocator_state(t, dev, 4500);
  EXPECT_EQ(s.time_ns, 3500u);
  EXPECT_EQ(s.device, "cpu");
  ASSERT_EQ(s.segments.size(), 1u);
  const an::SegmentState& seg = s.segments[0];
  EXPECT_EQ(seg.addr, 0x10000u);
  EXPECT_EQ(seg.size, 1u << 20);
  EXPECT_EQ(seg.kind, "segment");
  ASSERT_EQ(seg.blocks.size(), 3u);
  EXPECT_EQ(seg.blocks[0].addr, 0x10000u);
  EXPECT_EQ(seg.blocks[1].addr, 0x10400u);
  EXPECT_EQ(seg.blocks[1].size, 2048u);
  EXPECT_EQ(seg.blocks[1].site, "0xb1");
  EXPECT_EQ(seg.blocks[2].size, 512u);
  EXPECT_EQ(seg.allocated_bytes(), 3584u);
  EXPECT_EQ(seg.pending_bytes(), 0u);
  EXPECT_EQ(seg.cached_bytes(), (1u << 20) - 3584u);
  // After B's free (t=5000) only A and C; before the segment, nothing.
  EXPECT_EQ(an::allocator_state(t, dev, 5000).segments.at(0).blocks.size(), 2u);
  EXPECT_TRUE(an::allocator_state(t, dev, 999).segments.empty());
}

TEST(TimelineQueriesPending, ABlockFreedButNotCompletedIsPending) {
  const std::string path = temp_path("pending");
  {
    Builder b(path);
    b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
    b.alloc(2000, 0x10000, 4096, 1);
    b.block(ev::Kind::free_requested, 3000, 0x10000, 4096);  // another stream still uses it
    b.block(ev::Kind::free_completed, 4000, 0x10000, 4096);
    b.finish(5000);
  }
  an::Trace t = an::Trace::open(path);
  const int64_t dev = t.devices()[0].id;
  auto blocks = [&](uint64_t ts) { return an::allocator_state(t, dev, ts).segments.at(0).blocks; };
  ASSERT_EQ(blocks(2500).size(), 1u);
  EXPECT_FALSE(blocks(2500)[0].pending_free);
  ASSERT_EQ(blocks(3500).size(), 1u);
  EXPECT_TRUE(blocks(3500)[0].pending_free);
  EXPECT_EQ(an::allocator_state(t, dev, 3500).segments[0].pending_bytes(), 4096u);
  EXPECT_TRUE(blocks(4000).empty());
  remove_trace(path);
}

// Live in [4500, 7500): A (2000-8000), B (3000-5000), C (4000-leaked), D (from 7000).
TEST_F(TimelineQueries, LiveInARangeIsWhatWasAllocatedAtAnyTimeInIt) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  auto addrs = [&](uint64_t from, uint64_t to) {
    std::vector<uint64_t> out;
    for (const auto& r : an::live_in_range(t, dev, from, to)) out.push_back(r.addr);
    return out;
  };
  EXPECT_EQ(addrs(4500, 7500), (std::vector<uint64_t>{0x10000, 0x10400, 0x10c00, 0x11000}));
  EXPECT_EQ(addrs(5000, 7000), (std::vector<uint64_t>{0x10000, 0x10c00}));  // B freed at 5000
  EXPECT_EQ(addrs(1000, 2000), std::vector<uint64_t>{});                    // A from 2000 on
  EXPECT_EQ(addrs(8500, 9500), (std::vector<uint64_t>{0x10c00, 0x11000}));
}

TEST_F(TimelineQueries, CurvesOnlyLeavesTheStepsAndThePeakOut) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  an::TimelineRequest req{1000, 9000, 4};
  an::Timeline full = an::timeline(t, dev, req);
  req.curves_only = true;
  an::Timeline curves = an::timeline(t, dev, req);
  EXPECT_EQ(curves.allocated.last, full.allocated.last);
  EXPECT_EQ(curves.allocated.max, full.allocated.max);
  EXPECT_EQ(curves.allocated.min, full.allocated.min);
  EXPECT_EQ(curves.reserved.last, full.reserved.last);
  EXPECT_EQ(curves.active.max, full.active.max);
  EXPECT_EQ(curves.requested.max, full.requested.max);
  EXPECT_TRUE(curves.steps.empty());
  EXPECT_FALSE(curves.peak_allocated.has_value());
  EXPECT_EQ(an::step_starts(t), (std::vector<std::pair<int64_t, uint64_t>>{{0, 1500}, {1, 6000}}));
}

// A viewer's sequence of zooms and pans through one cache gives what timeline() gives for each
// request, and zooming in at the same level reads no row from the trace.
TEST_F(TimelineQueries, TheCacheGivesTheSameColumnsAndReadsOnlyNewRows) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  an::TimelineCache cache;
  const std::pair<uint64_t, uint64_t> views[] = {{1000, 9001}, {2000, 8000}, {2500, 6500},
                                                 {3500, 7500}, {1000, 5000}, {6000, 9001},
                                                 {1000, 9001}, {4000, 4400}};
  for (const auto& [from, to] : views) {
    for (size_t width : {3, 16}) {
      const an::Timeline want = an::timeline(t, dev, {from, to, width, true});
      const an::Timeline got = cache.timeline(t, dev, {from, to, width, true});
      EXPECT_EQ(got.level, want.level);
      for (auto [g, w] : {std::pair{&got.allocated, &want.allocated},
                          {&got.active, &want.active},
                          {&got.reserved, &want.reserved},
                          {&got.requested, &want.requested}}) {
        EXPECT_EQ(g->min, w->min) << from << ".." << to << " in " << width;
        EXPECT_EQ(g->max, w->max) << from << ".." << to << " in " << width;
        EXPECT_EQ(g->last, w->last) << from << ".." << to << " in " << width;
      }
    }
  }
  an::TimelineCache fresh;
  fresh.timeline(t, dev, {1000, 9001, 16, true});
  const uint64_t read = fresh.rows_read();
  EXPECT_GT(read, 0u);
  fresh.timeline(t, dev, {2000, 8000, 16, true});  // zoomed in, level 0 still
  EXPECT_EQ(fresh.rows_read(), read);
}

// Bands by category: parameters 1024 from t=2000 on, activations 2048 over [3000, 5000),
// gradients 512 from t=4000 to 8000. At any time each band is what live_allocations() counts for
// the category, and the bands add up to the allocated curve.
TEST(TimelineQueriesBands, CategoryBandsAddUpToTheAllocatedCurve) {
  const std::string path = temp_path("bands");
  {
    Builder b(path);
    b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
    b.alloc(2000, 0x10000, 1024, 1, ev::Category::parameter);
    b.alloc(3000, 0x10400, 2048, 2, ev::Category::activation);
    b.alloc(4000, 0x10c00, 512, 1, ev::Category::gradient);
    b.free(5000, 0x10400, 2048);
    b.free(8000, 0x10c00, 512);
    b.finish(9000);
  }
  an::Trace t = an::Trace::open(path);
  const int64_t dev = t.devices()[0].id;
  an::Bands bands = an::allocated_bands(t, dev, an::BandBy::category);
  ASSERT_EQ(bands.labels(), (std::vector<std::string>{"parameter", "gradient", "activation"}));
  EXPECT_EQ(bands.changes(), 5u);
  EXPECT_EQ(bands.at(1999), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(bands.at(2000), (std::vector<int64_t>{1024, 0, 0}));
  EXPECT_EQ(bands.at(4500), (std::vector<int64_t>{1024, 512, 2048}));
  EXPECT_EQ(bands.at(5000), (std::vector<int64_t>{1024, 512, 0}));
  EXPECT_EQ(bands.at(9000), (std::vector<int64_t>{1024, 0, 0}));
  for (uint64_t ts = 1000; ts <= 9000; ts += 250) {
    const auto v = bands.at(ts);
    const an::LiveBreakdown live = an::live_at(t, dev, {ts, {}}, an::GroupBy::category, 0);
    EXPECT_EQ(std::accumulate(v.begin(), v.end(), int64_t{0}), live.bytes) << ts;
    for (const an::Group& g : live.groups) {
      size_t band = 0;
      while (band < bands.size() && bands.labels()[band] != g.key) ++band;
      ASSERT_LT(band, bands.size()) << g.key;
      EXPECT_EQ(v[band], g.bytes) << g.key << " at " << ts;
    }
  }
  // Columns: the bands of each column add up to the timeline's allocated `last`.
  an::Timeline tl = an::timeline(t, dev, {1000, 9000, 16});
  an::BandColumns c = bands.columns(1000, 9000, 16);
  ASSERT_EQ(c.width(), tl.width());
  EXPECT_EQ(c.column_ns, tl.column_ns);
  for (size_t col = 0; col < c.width(); ++col) {
    int64_t sum = 0;
    for (size_t b = 0; b < bands.size(); ++b) sum += c.values[b][col];
    EXPECT_EQ(sum, tl.allocated.last[col]) << col;
  }

  // Wider columns read coarser level-of-detail buckets; taken at the same instants, the bands
  // still add up to `last`.
  for (size_t width : {1, 2, 3, 7}) {
    an::Timeline coarse = an::timeline(t, dev, {1100, 9000, width});
    an::BandColumns cc = bands.columns(1100, 9000, width, coarse.level_width_ns);
    for (size_t col = 0; col < width; ++col) {
      int64_t sum = 0;
      for (size_t b = 0; b < bands.size(); ++b) sum += cc.values[b][col];
      EXPECT_EQ(sum, coarse.allocated.last[col]) << width << " columns, column " << col;
    }
  }

  // By site, the top one: stack 2 (0xb1, 2048 at the peak), then stack 1's 1536 as the rest.
  an::Bands sites = an::allocated_bands(t, dev, an::BandBy::site, 1);
  ASSERT_EQ(sites.labels(), (std::vector<std::string>{"0xb1", "other sites"}));
  EXPECT_EQ(sites.at(4500), (std::vector<int64_t>{2048, 1536}));
  EXPECT_EQ(sites.at(6000), (std::vector<int64_t>{0, 1536}));
  remove_trace(path);
}

// A trace being written: LiveTrace sees each commit, and only what was committed.
TEST(TimelineQueriesLive, EachPollReadsWhatWasCommittedSince) {
  const std::string path = temp_path("live");
  Builder b(path);
  b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
  b.alloc(2000, 0x10000, 1024, 1);
  b.commit();
  an::LiveTrace live(path);
  EXPECT_EQ(live.poll(), 2u);
  EXPECT_EQ(live.poll(), 0u);  // nothing new
  EXPECT_EQ(live.devices(), std::vector<std::string>{"cpu"});
  EXPECT_EQ(live.origin_ns(), 1000u);
  EXPECT_EQ(live.end_ns(), 2000u);
  EXPECT_EQ(live.peak(0)->bytes, 1024);
  EXPECT_FALSE(live.finalized());
  b.alloc(3000, 0x10400, 2048, 2);
  b.free(4000, 0x10000, 1024);
  EXPECT_EQ(live.poll(), 0u);  // appended, not committed
  b.commit();
  EXPECT_EQ(live.poll(), 3u);
  EXPECT_EQ(live.end_ns(), 4000u);
  EXPECT_EQ(live.peak(0)->bytes, 3072);
  EXPECT_EQ(live.peak(0)->ts_ns, 3000u);
  // Columns of [1000, 5000) by 1000 ns, as timeline() makes them for a finalized trace.
  const an::Timeline tl = live.timeline(0, {1000, 5000, 4});
  EXPECT_EQ(tl.allocated.last, (std::vector<int64_t>{0, 1024, 3072, 2048}));
  EXPECT_EQ(tl.allocated.max, (std::vector<int64_t>{0, 1024, 3072, 3072}));
  EXPECT_EQ(tl.active.last, (std::vector<int64_t>{0, 1024, 3072, 2048}));
  EXPECT_EQ(tl.reserved.last, (std::vector<int64_t>(4, 1 << 20)));
  b.finish(5000);
  EXPECT_TRUE(live.finalized());
  an::Trace t = an::Trace::open(path);
  const an::Timeline done = an::timeline(t, t.devices()[0].id, {1000, 5000, 4});
  EXPECT_EQ(done.allocated.last, tl.allocated.last);
  EXPECT_EQ(done.allocated.max, tl.allocated.max);
  remove_trace(path);
}

// A recorded training run, with threads allocating beside the loop: the live view's curves
// are finalize's level 0, change for change (the fold of Note [Memory curves]).
TEST(TimelineQueriesLive, TheCurvesOfARecordedRunAreTheFinalizedLevel0) {
  const std::string path = temp_path("recorded");
  tidemark::record::Options o;
  o.path = path;
  tidemark::record::start(o);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([] {
        for (int i = 0; i < 500; ++i) {
          tl::Tensor a = tl::empty({64, 64});
          tl::Tensor b = a.t().contiguous();
        }
      });
    samples::MlpConfig c;
    c.steps = 10;
    samples::MlpTrainer trainer(c);
    for (int i = 0; i < c.steps; ++i) trainer.step();
    for (auto& th : threads) th.join();
  }
  tl::empty_cache(tl::Device("cpu"));
  const auto rs = tidemark::record::stop();
  EXPECT_EQ(rs.dropped, 0u);
  EXPECT_GT(analysis_test::expect_live_curves_equal_level_0(path), 2000u);
  remove_trace(path);
}

// Not a trace: the error names the file.
TEST(TimelineQueriesLive, AFileThatIsNotATraceIsRefused) {
  const std::string path = temp_path("text");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a trace", f);
    std::fclose(f);
  }
  try {
    an::LiveTrace live(path);
    ADD_FAILURE() << "opened a text file";
  } catch (const tidemark::store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  remove_trace(path);
}

}  // namespace
