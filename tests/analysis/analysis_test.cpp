// profiler/analysis on synthetic traces written with TraceWriter and finalized, against values
// worked out by hand (see the comment above make_trace in trace_builder.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "profiler/analysis/diff.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/units.h"
#include "profiler/store/trace_writer.h"
#include "trace_builder.h"

namespace {

namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;
namespace ev = tidemark::events;
namespace st = tidemark::store;
using analysis_test::Builder;
using analysis_test::kMiB;
using analysis_test::make_segments_trace;
using analysis_test::make_trace;
using analysis_test::remove_trace;
using analysis_test::temp_path;

using AnalysisTest = analysis_test::BaseTraceTest;

TEST_F(AnalysisTest, PeaksAndWhatWasLiveGroupsBySite) {
  an::Trace t = an::Trace::open(path_);
  ASSERT_EQ(t.devices().size(), 1u);
  const int64_t dev = t.devices()[0].id;
  EXPECT_EQ(t.devices()[0].name, "cpu");
  EXPECT_EQ(t.origin_ns(), 1000u);
  auto reserved = an::peak(t, dev, st::Curve::reserved);  // the store's (TraceReader::peak)
  ASSERT_TRUE(reserved);
  EXPECT_EQ(reserved->bytes, 1 << 20);
  EXPECT_EQ(reserved->ts_ns, 1000u);
  auto p = an::peak(t, dev);
  EXPECT_EQ(p->bytes, 5632);
  EXPECT_EQ(p->ts_ns, 7000u);

  an::LiveBreakdown b = an::live_at(t, dev, *an::peak_point(t, dev), an::GroupBy::site, 10);
  EXPECT_EQ(b.bytes, 5632);
  EXPECT_EQ(b.count, 3u);
  EXPECT_EQ(b.time_ns, 6000u);
  ASSERT_EQ(b.groups.size(), 2u);
  EXPECT_EQ(b.groups[0].label, "0xb1");  // unsymbolized: the innermost address
  EXPECT_EQ(b.groups[0].bytes, 4096);
  EXPECT_EQ(b.groups[0].count, 1u);
  EXPECT_EQ(b.groups[1].label, "0xa1");
  EXPECT_EQ(b.groups[1].bytes, 1536);
  EXPECT_EQ(b.groups[1].count, 2u);

  // At t=4500 (between C and the free of B): A, B, C.
  an::LiveBreakdown mid = an::live_at(t, dev, {4500, std::nullopt}, an::GroupBy::category, 0);
  EXPECT_EQ(mid.bytes, 3584);
  ASSERT_EQ(mid.groups.size(), 1u);
  EXPECT_EQ(mid.groups[0].label, "unknown");
  EXPECT_EQ(an::live_at(t, dev, an::step_point(t, 1), an::GroupBy::scope, 0).bytes, 1536);
  EXPECT_THROW(an::step_point(t, 7), std::invalid_argument);
}

TEST_F(AnalysisTest, SummaryAndLeaks) {
  an::Trace t = an::Trace::open(path_);
  an::Summary s = an::summarize(t);
  EXPECT_EQ(s.duration_ns, 8000u);
  EXPECT_EQ(s.step_count, 2u);
  ASSERT_EQ(s.devices.size(), 1u);
  const an::DeviceSummary& d = s.devices[0];
  EXPECT_EQ(d.peak_allocated_bytes, 5632);
  EXPECT_EQ(d.peak_allocated_time_ns, 6000u);
  EXPECT_EQ(d.peak_reserved_bytes, 1 << 20);
  EXPECT_EQ(d.peak_active_bytes, 5632);
  EXPECT_EQ(d.final_allocated_bytes, 512);
  EXPECT_EQ(d.final_reserved_bytes, 1 << 20);
  EXPECT_EQ(d.alloc_count, 4u);
  EXPECT_EQ(d.segment_alloc_count, 1u);
  EXPECT_EQ(d.sync_count, 3u);
  EXPECT_EQ(d.leaked_bytes, 512);
  ASSERT_TRUE(s.top_at_peak);
  EXPECT_EQ(s.top_at_peak->bytes, 5632);
  EXPECT_FALSE(s.categories_at_peak);  // every allocation `unknown`: nothing to split
  EXPECT_EQ(s.leaks.bytes, 512);
  EXPECT_EQ(s.leaks.count, 1u);
  ASSERT_EQ(s.leaks.groups.size(), 1u);
  EXPECT_EQ(s.leaks.groups[0].label, "0xa1");
  ASSERT_EQ(s.leaks.by_step.size(), 1u);
  EXPECT_EQ(s.leaks.by_step[0].step, 0);

  // The one segment (no stack) is all the reserved memory at the reserved peak.
  ASSERT_TRUE(s.reserved_at_peak);
  EXPECT_EQ(s.reserved_at_peak->bytes, 1 << 20);
  ASSERT_EQ(s.reserved_at_peak->groups.size(), 1u);
  EXPECT_EQ(s.reserved_at_peak->groups[0].label, "(no stack)");

  nlohmann::json j = s;
  EXPECT_EQ(j["schema_version"], tidemark::store::kSchemaVersion);
  EXPECT_EQ(j["devices"][0]["device"], "cpu");
  EXPECT_EQ(j["devices"][0]["peak_allocated_bytes"], 5632);
  EXPECT_EQ(j["leaks"]["bytes"], 512);
  EXPECT_EQ(j["top_at_peak"]["groups"][0]["bytes"], 4096);
}

TEST_F(AnalysisTest, StepsGrowthAndSyncs) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  auto steps = an::step_stats(t, dev);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].number, 0);
  EXPECT_EQ(steps[0].allocated_at_start_bytes, 0);
  EXPECT_EQ(steps[0].peak_allocated_bytes, 3584);
  EXPECT_EQ(steps[0].alloc_count, 3u);
  EXPECT_EQ(steps[0].sync_count, 2u);
  EXPECT_EQ(steps[1].allocated_at_start_bytes, 1536);
  EXPECT_EQ(steps[1].peak_allocated_bytes, 5632);
  EXPECT_EQ(steps[1].alloc_count, 1u);
  EXPECT_EQ(steps[1].sync_count, 1u);

  an::SyncReport r = an::syncs(t, 10);
  EXPECT_EQ(r.count, 3u);
  EXPECT_EQ(r.total_ns, 300u);
  EXPECT_EQ(r.max_per_step, 2u);
  EXPECT_EQ(r.max_step, 0);
  ASSERT_EQ(r.sites.size(), 2u);
  EXPECT_EQ(r.sites[0].label, "0xb1");
  EXPECT_EQ(r.sites[0].count, 2u);
  EXPECT_EQ(r.sites[0].kind, "item");

  // Linear growth of 1000 bytes per step after a warm-up; a flat series does not grow.
  std::vector<std::pair<int64_t, int64_t>> linear, flat;
  for (int64_t i = 0; i < 10; ++i) {
    linear.emplace_back(i, i == 0 ? 0 : 50000 + 1000 * i);
    flat.emplace_back(i, i == 0 ? 0 : 50000);
  }
  an::Growth g = an::fit_growth(linear);
  EXPECT_TRUE(g.growing);
  EXPECT_NEAR(g.slope_bytes_per_step, 1000.0, 1e-6);
  EXPECT_NEAR(g.r2, 1.0, 1e-9);
  EXPECT_FALSE(an::fit_growth(flat).growing);
  EXPECT_FALSE(an::growth(t, dev).growing);  // two boundaries are too few to tell
}

TEST_F(AnalysisTest, TimelineColumnsHoldMinMaxAndLast) {
  an::Trace t = an::Trace::open(path_);
  const int64_t dev = t.devices()[0].id;
  an::TimelineRequest req;
  req.from_ts = 1000;
  req.to_ts = 9000;
  req.width = 4;  // columns of 2000 ns: [1000,3000) [3000,5000) [5000,7000) [7000,9000)
  an::Timeline tl = an::timeline(t, dev, req);
  EXPECT_EQ(tl.column_ns, 2000u);
  EXPECT_EQ(tl.level, 0);  // the coarsest level's 4 us buckets do not fit a column
  // A column's min includes the value it starts with (the previous column's last).
  EXPECT_EQ(tl.allocated.min, (std::vector<int64_t>{0, 1024, 1536, 1536}));
  EXPECT_EQ(tl.allocated.max, (std::vector<int64_t>{1024, 3584, 3584, 5632}));
  EXPECT_EQ(tl.allocated.last, (std::vector<int64_t>{1024, 3584, 1536, 4608}));
  EXPECT_EQ(tl.reserved.max, (std::vector<int64_t>(4, 1 << 20)));
  ASSERT_TRUE(tl.peak_allocated);
  EXPECT_EQ(tl.peak_allocated->bytes, 5632);
  EXPECT_EQ(tl.steps.size(), 2u);

  // One column over everything: min 0, max the peak, last the final value.
  req.from_ts.reset();
  req.to_ts.reset();
  req.width = 1;
  an::Timeline all = an::timeline(t, dev, req);
  EXPECT_EQ(all.allocated.min[0], 0);
  EXPECT_EQ(all.allocated.max[0], 5632);
  EXPECT_EQ(all.allocated.last[0], 512);
}

TEST_F(AnalysisTest, TensorsAndViewsLiveAtATime) {
  an::Trace t = an::Trace::open(path_);
  auto live = an::tensors_live_at(t, 2250);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].tensor_id, 1u);
  EXPECT_EQ(live[1].base_id, 1u);
  EXPECT_EQ(live[1].op, "view");
  EXPECT_EQ(live[0].sizes, "[2,3]");
  EXPECT_EQ(an::tensors_live_at(t, 2400).size(), 1u);
}

// A training step's memory by category at the allocated peak: parameters, activations kept
// for backward and (with `adam`) optimizer state; a temporary freed before the peak.
void make_categorised_trace(const std::string& path, int64_t activations, bool adam) {
  analysis_test::Builder b(path);
  b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
  b.alloc(2000, 0x10000, 4096, 1, ev::Category::parameter);
  b.alloc(3000, 0x20000, 1024, 2, ev::Category::temporary);
  b.free(3500, 0x20000, 1024);
  b.alloc(4000, 0x30000, static_cast<uint64_t>(activations), 2, ev::Category::activation);
  if (adam) b.alloc(5000, 0x40000, 2048, 3, ev::Category::optimizer_state);
  b.alloc(6000, 0x50000, 512, 3);  // unknown
  b.free(7000, 0x30000, static_cast<uint64_t>(activations));
  b.finish(8000);
}

TEST(AnalysisCategories, SummaryAndDiffSplitThePeakByCategory) {
  const std::string a_path = temp_path("categories_a"), b_path = temp_path("categories_b");
  make_categorised_trace(a_path, 8192, false);
  make_categorised_trace(b_path, 16384, true);
  an::Summary s = an::summarize(an::Trace::open(a_path));
  ASSERT_TRUE(s.categories_at_peak);
  EXPECT_EQ(s.categories_at_peak->bytes, 4096 + 8192 + 512);
  ASSERT_EQ(s.categories_at_peak->groups.size(), 3u);  // largest first; the temporary was freed
  EXPECT_EQ(s.categories_at_peak->groups[0].label, "activation");
  EXPECT_EQ(s.categories_at_peak->groups[0].bytes, 8192);
  EXPECT_EQ(s.categories_at_peak->groups[1].label, "parameter");
  EXPECT_EQ(s.categories_at_peak->groups[1].bytes, 4096);
  EXPECT_EQ(s.categories_at_peak->groups[2].label, "unknown");
  EXPECT_EQ(s.categories_at_peak->groups[2].bytes, 512);
  nlohmann::json j = s;
  EXPECT_EQ(j["categories_at_peak"]["groups"][0]["key"], "activation");

  an::TraceDiff d = an::diff(an::Trace::open(a_path), an::Trace::open(b_path));
  ASSERT_EQ(d.categories.size(), 1u);
  const an::TraceDiff::Sites& c = d.categories[0];
  ASSERT_EQ(c.changed.size(), 1u);  // parameter and unknown held the same
  EXPECT_EQ(c.changed[0].label, "activation");
  EXPECT_EQ(c.changed[0].delta(), 8192);
  ASSERT_EQ(c.added.size(), 1u);
  EXPECT_EQ(c.added[0].label, "optimizer_state");
  EXPECT_EQ(c.added[0].b_bytes, 2048);
  EXPECT_TRUE(c.vanished.empty());
  nlohmann::json dj = d;
  EXPECT_EQ(dj["categories_at_peak"][0]["changed"][0]["delta_bytes"], 8192);
  remove_trace(a_path);
  remove_trace(b_path);
}

// Note [Matching devices]: by name, whatever their row ids; A's devices first, then B's own.
TEST(Analysis, DevicesOfTwoTracesMatchByName) {
  const std::string a_path = temp_path("match_a"), b_path = temp_path("match_b");
  {
    Builder a(a_path);
    a.block(ev::Kind::alloc, 2000, 0x100, 512);  // cpu
    a.device({ev::DeviceType::cuda, 0});
    a.block(ev::Kind::alloc, 3000, 0x200, 1024);
    a.finish(4000);
  }
  {
    Builder b(b_path);
    b.device({ev::DeviceType::cuda, 1});
    b.block(ev::Kind::alloc, 2000, 0x300, 256);
    b.device({ev::DeviceType::cuda, 0});
    b.block(ev::Kind::alloc, 2500, 0x400, 2048);
    b.finish(4000);
  }
  const an::Trace ta = an::Trace::open(a_path), tb = an::Trace::open(b_path);
  const std::vector<an::DeviceMatch> m = an::match_devices(ta, tb);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].name, "cpu");
  EXPECT_EQ(m[0].a, &ta.device("cpu"));
  EXPECT_EQ(m[0].b, &tb.device("cpu"));
  EXPECT_EQ(m[1].name, "cuda:0");
  EXPECT_EQ(m[1].a, &ta.device("cuda:0"));
  EXPECT_EQ(m[1].b, &tb.device("cuda:0"));
  EXPECT_NE(m[1].a->id, m[1].b->id);  // matched by name, not by row
  EXPECT_EQ(m[2].name, "cuda:1");
  EXPECT_EQ(m[2].a, nullptr);
  EXPECT_EQ(m[2].b, &tb.device("cuda:1"));
  const std::vector<an::DeviceMatch> back = an::match_devices(tb, ta);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[1].name, "cuda:1");
  EXPECT_EQ(back[1].b, nullptr);
  remove_trace(a_path);
  remove_trace(b_path);
}

TEST_F(AnalysisTest, DiffReportsPeakDeltasAndSiteChanges) {
  std::string bigger = temp_path("bigger");
  make_trace(bigger, true);
  an::Trace a = an::Trace::open(path_);
  an::Trace b = an::Trace::open(bigger);
  an::TraceDiff d = an::diff(a, b);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].peak_allocated_delta, 10752 - 5632);  // D grew by 4096, E is new
  EXPECT_EQ(d.devices[0].peak_reserved_delta, 0);
  ASSERT_EQ(d.sites.size(), 1u);
  ASSERT_EQ(d.sites[0].changed.size(), 1u);
  EXPECT_EQ(d.sites[0].changed[0].label, "0xb1");
  EXPECT_EQ(d.sites[0].changed[0].delta(), 4096);
  ASSERT_EQ(d.sites[0].added.size(), 1u);
  EXPECT_EQ(d.sites[0].added[0].label, "0xe1");
  EXPECT_EQ(d.sites[0].added[0].b_bytes, 1024);
  EXPECT_TRUE(d.sites[0].vanished.empty());
  // Neither trace tags categories: no category differences (the `unknown` bytes are the peaks').
  ASSERT_EQ(d.categories.size(), 1u);
  EXPECT_TRUE(d.categories[0].changed.empty() && d.categories[0].added.empty() &&
              d.categories[0].vanished.empty());
  an::TraceDiff back = an::diff(b, a);
  EXPECT_EQ(back.devices[0].peak_allocated_delta, -5120);
  ASSERT_EQ(back.sites[0].vanished.size(), 1u);
  EXPECT_EQ(back.sites[0].vanished[0].label, "0xe1");
  remove_trace(bigger);
}

// Reserved memory by site on a trace of segments only (make_segments_trace's comment has the
// values worked out by hand).
TEST(AnalysisReserved, SitesOfReservedMemoryAtTheReservedPeak) {
  const std::string path = temp_path("reserved");
  make_segments_trace(path);
  an::Trace t = an::Trace::open(path);
  const int64_t cuda = t.device("cuda:0").id;
  std::optional<an::LiveBreakdown> b = an::reserved_at_peak(t, cuda, 10);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->device, "cuda:0");
  EXPECT_EQ(b->time_ns, 4000u);
  EXPECT_EQ(b->bytes, int64_t(28 * kMiB));
  EXPECT_EQ(b->count, 3u);
  EXPECT_EQ(b->by, an::GroupBy::site);
  ASSERT_EQ(b->groups.size(), 2u);  // warmup's segment was freed before the peak
  EXPECT_EQ(b->groups_total, 2u);
  EXPECT_EQ(b->groups[0].key, "load_model@train.py");
  EXPECT_EQ(b->groups[0].label, "load_model (train.py:14)");
  EXPECT_EQ(b->groups[0].bytes, int64_t(26 * kMiB));
  EXPECT_EQ(b->groups[0].count, 2u);
  EXPECT_EQ(b->groups[0].requested_bytes, 0);
  EXPECT_EQ(b->groups[1].label, "(no stack)");
  EXPECT_EQ(b->groups[1].bytes, int64_t(2 * kMiB));
  EXPECT_EQ(b->groups[1].count, 1u);
  for (const an::Group& g : b->groups) EXPECT_EQ(g.label.find("warmup"), std::string::npos);
  // The limit keeps the largest.
  b = an::reserved_at_peak(t, cuda, 1);
  ASSERT_EQ(b->groups.size(), 1u);
  EXPECT_EQ(b->groups_total, 2u);
  EXPECT_EQ(b->groups[0].label, "load_model (train.py:14)");
  // The cpu has no reserved memory.
  EXPECT_FALSE(an::reserved_at_peak(t, t.device("cpu").id, 10));

  // After the middle third of the mapped range was unmapped (t=6500): its two outer pieces,
  // and the two whole segments.
  std::vector<st::SegmentRow> live = an::live_segments(t, cuda, {6500, std::nullopt});
  ASSERT_EQ(live.size(), 4u);
  std::sort(live.begin(), live.end(), [](auto& x, auto& y) { return x.addr < y.addr; });
  int64_t bytes = 0;
  for (const st::SegmentRow& r : live) bytes += static_cast<int64_t>(r.size);
  EXPECT_EQ(bytes, int64_t(20 * kMiB));
  EXPECT_EQ(live[2].addr, 0x40000000u);
  EXPECT_EQ(live[2].size, 8 * kMiB);
  EXPECT_EQ(live[3].addr, 0x41000000u);
  EXPECT_EQ(live[3].size, 8 * kMiB);
  EXPECT_EQ(live[3].stack_id, 4u);

  // summarize() takes it from the device with the highest reserved peak; the allocated top
  // sites have nothing (no device has allocations).
  an::Summary s = an::summarize(t);
  ASSERT_TRUE(s.reserved_at_peak);
  EXPECT_EQ(s.reserved_at_peak->device, "cuda:0");
  EXPECT_EQ(s.reserved_at_peak->bytes, int64_t(28 * kMiB));
  nlohmann::json j = s;
  EXPECT_EQ(j["reserved_at_peak"]["groups"][0]["bytes"], 26 * kMiB);
  EXPECT_EQ(j["reserved_at_peak"]["count"], 3);
  remove_trace(path);
}

// Reserved memory with no allocated blocks (an injected PyTorch trace) says nothing about
// fragmentation or cached memory: those detectors skip, naming why, instead of reporting
// reserved against an allocated curve that reads 0.
TEST(AnalysisReserved, AllocatorDiagnosesSkipATraceWithoutBlocks) {
  const std::string path = temp_path("segments_diagnose");
  make_segments_trace(path, /*keep_warmup=*/true);
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path));
  for (const diag::Finding& f : d.findings) {
    EXPECT_NE(f.id, "fragmentation") << f.title;
    EXPECT_NE(f.id, "cache-held") << f.title;
  }
  size_t skipped = 0;
  for (const auto& s : d.skipped) {
    if (s.id != "fragmentation" && s.id != "cache-held") continue;
    ++skipped;
    EXPECT_NE(s.reason.find("no allocated blocks"), std::string::npos) << s.reason;
  }
  EXPECT_EQ(skipped, 2u);
  remove_trace(path);

  // Mixed: the cpu has blocks (and is examined), cuda:0 segments only (named as skipped).
  const std::string mixed = temp_path("segments_mixed");
  {
    analysis_test::Builder b(mixed);
    b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
    b.alloc(2000, 0x10000, 4096, 1);
    b.device({ev::DeviceType::cuda, 0});
    b.block(ev::Kind::segment_alloc, 3000, 0x10000000, 64 << 20, 2);
    b.finish(4000);
  }
  const diag::Diagnosis m = diag::diagnose(an::Trace::open(mixed));
  std::vector<std::string> reasons;
  for (const auto& s : m.skipped)
    if (s.id == "fragmentation" || s.id == "cache-held") reasons.push_back(s.id + " " + s.reason);
  ASSERT_EQ(reasons.size(), 2u);
  for (const std::string& r : reasons)
    EXPECT_NE(r.find("cuda:0: reserved memory but no allocated blocks"), std::string::npos) << r;
  for (const diag::Finding& f : m.findings) EXPECT_NE(f.device, "cuda:0") << f.title;
  remove_trace(mixed);
}

TEST(AnalysisReserved, DiffReportsReservedSiteChanges) {
  const std::string a_path = temp_path("reserved_a"), b_path = temp_path("reserved_b");
  make_segments_trace(a_path);
  make_segments_trace(b_path, /*keep_warmup=*/true);
  an::TraceDiff d = an::diff(an::Trace::open(a_path), an::Trace::open(b_path));
  ASSERT_EQ(d.reserved_sites.size(), 2u);  // cpu, cuda:0
  const an::TraceDiff::Sites& s = d.reserved_sites[1];
  EXPECT_EQ(s.device, "cuda:0");
  EXPECT_TRUE(s.changed.empty());  // load_model and (no stack) hold the same at both peaks
  EXPECT_TRUE(s.vanished.empty());
  ASSERT_EQ(s.added.size(), 1u);
  EXPECT_EQ(s.added[0].label, "warmup (train.py:30)");
  EXPECT_EQ(s.added[0].b_bytes, int64_t(20 * kMiB));
  EXPECT_EQ(s.added[0].b_count, 1u);
  EXPECT_EQ(d.devices[1].peak_reserved_delta, int64_t(20 * kMiB));
  nlohmann::json j = d;
  EXPECT_EQ(j["reserved_sites_at_peak"][1]["new"][0]["delta_bytes"], 20 * kMiB);
  remove_trace(a_path);
  remove_trace(b_path);
}

// Regression: a function in an anonymous namespace returning a std:: type was taken for a
// standard-library frame, so the site fell through to its caller.
TEST(AnalysisSite, AnonymousNamespaceFunctionsReturningStdTypesAreUserSites) {
  const std::string path = temp_path("site");
  Builder b(path);
  b.stack_node(10, 0, 0xc0);   // main
  b.stack_node(11, 10, 0xc1);  // make_batch
  b.stack_node(12, 11, 0xc2);  // tl::empty (tensorlib)
  b.alloc(2000, 0x1000, 512, 12);
  st::FinalizeOptions o;
  o.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0xc0) return {{"main", "/home/u/main.cpp", 3, false, "/home/u/app"}};
    if (ip == 0xc1)
      return {{"std::vector<int, std::allocator<int> > (anonymous namespace)::make_batch(int)",
               "/home/u/train.cpp", 12, false, "/home/u/app"}};
    return {{"tl::empty(tl::ArrayRef<long>, tl::TensorOptions)",
             "/src/tensorlib/core/factories.cpp", 40, false, "/home/u/app"}};
  };
  b.finish(3000, o);
  an::Trace t = an::Trace::open(path);
  EXPECT_EQ(t.site(12).label,
            "std::vector<int, std::allocator<int> > (anonymous namespace)::make_batch(int) "
            "(train.cpp:12)");
  auto f = t.site_frame(12);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->line, 12);
  remove_trace(path);
}

TEST(Units, SizesAndTimes) {
  EXPECT_EQ(an::parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(an::parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(an::parse_size("1e9"), 1000000000ull);
  EXPECT_EQ(an::parse_size("1.5GB"), 1500000000ull);
  EXPECT_EQ(an::parse_size("4096"), 4096ull);
  EXPECT_EQ(an::parse_size("0"), 0ull);
  EXPECT_FALSE(an::parse_size("-1"));
  EXPECT_FALSE(an::parse_size("12XB"));
  EXPECT_FALSE(an::parse_size(""));
  EXPECT_FALSE(an::parse_size("inf"));
  EXPECT_EQ(an::parse_duration_ns("1.5s"), 1500000000ull);
  EXPECT_EQ(an::parse_duration_ns("200ms"), 200000000ull);
  EXPECT_EQ(an::parse_duration_ns("123456ns"), 123456ull);
  EXPECT_EQ(an::parse_duration_ns("10us"), 10000ull);
  EXPECT_FALSE(an::parse_duration_ns("1x"));
  EXPECT_EQ(an::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(an::format_bytes(512), "512 B");
  EXPECT_EQ(an::with_commas(0), "0");
  EXPECT_EQ(an::with_commas(999), "999");
  EXPECT_EQ(an::with_commas(4194304), "4,194,304");
  EXPECT_EQ(an::with_commas(-1000), "-1,000");
}

// Note [The open last step]: syncs after the loop (a final loss read) land in the last step,
// which has no closing boundary; the busiest step is chosen among complete steps, and the last
// one counts only when it is the only step.
TEST(AnalysisSyncs, TheOpenLastStepCountsOnlyWhenAlone) {
  const std::string path = temp_path("open-step");
  {
    Builder b(path);
    b.step(1000, 1);
    b.sync(1500, 1);
    b.step(2000, 2);
    b.sync(2500, 1);
    b.step(3000, 3);
    for (uint64_t t = 3100; t < 3500; t += 100) b.sync(t, 2);  // after the loop
    b.finish(4000);
  }
  an::SyncReport r = an::syncs(an::Trace::open(path), 10);
  EXPECT_EQ(r.count, 6u);
  EXPECT_EQ(r.max_per_step, 1u);
  remove_trace(path);
  {
    Builder b(path);
    b.step(1000, 1);
    b.sync(1500, 1);
    b.sync(1600, 1);
    b.finish(2000);
  }
  r = an::syncs(an::Trace::open(path), 10);
  EXPECT_EQ(r.max_per_step, 2u);
  EXPECT_EQ(r.max_step, 1);
  remove_trace(path);
}

TEST(AnalysisOpen, UnfinalizedTraceIsRefusedWithTheFileNamed) {
  std::string path = temp_path("raw");
  remove_trace(path);
  st::TraceWriter::create(path, {})->close(0);
  try {
    an::Trace::open(path);
    FAIL() << "expected StoreError";
  } catch (const st::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not finalized"), std::string::npos);
  }
  EXPECT_NO_THROW(an::Trace::open(path, st::TraceReader::Require::raw));
  remove_trace(path);
}

}  // namespace
