// The ranks of a run: spreads, Note [Rank imbalance] and Note [Merged devices], on traces built
// by hand (trace_builder.h) whose peaks and differences are worked out below.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "analysis/trace_builder.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/merge.h"
#include "profiler/analysis/ranks.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/diagnose/rank_imbalance.h"
#include "profiler/store/sqlite_db.h"
#include "profiler/store/trace_reader.h"

namespace {

using namespace analysis_test;
namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;

constexpr uint64_t MiB = uint64_t{1} << 20;

// One rank's trace on the cpu (times in ns from 1000; start_unix_ns as given):
//   t=1000 segment_alloc 64 MiB @1                 reserved 64 MiB
//   t=2000 alloc A 8 MiB @1 (load_model) parameter allocated 8 MiB
//   t=3000 alloc B `b` @2 (warmup) activation      8 MiB + b: the peak
//   t=4000 free B, t=5000 free A
void make_rank(const std::string& path, std::optional<int64_t> rank, std::optional<int64_t> world,
               uint64_t b, int64_t start_unix_ns = 1'000'000'000, bool finish = true) {
  Builder t(path, "train", rank, world, start_unix_ns);
  t.block(ev::Kind::segment_alloc, 1000, 0x1000000, 64 * MiB, 1);
  t.alloc(2000, 0x1000000, 8 * MiB, 1, ev::Category::parameter);
  t.alloc(3000, 0x1800000, b, 2, ev::Category::activation);
  t.free(4000, 0x1800000, b);
  if (!finish) {
    t.commit();
    return;  // a rank killed here: no clean end, not finalized
  }
  t.free(5000, 0x1000000, 8 * MiB);
  st::FinalizeOptions options;
  options.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0xa1) return {{"load_model", "/src/train.py", 10, false, ""}};
    if (ip == 0xb1) return {{"warmup", "/src/train.py", 30, false, ""}};
    return {};
  };
  t.finish(5000, options);
}

class RanksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("tidemark_ranks_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::vector<diag::Finding> imbalance(const an::Trace& a, const an::Trace& b) {
  return diag::rank_imbalance(an::rank_devices(std::vector<an::RankedTrace>{{0, &a}, {1, &b}}));
}

TEST_F(RanksTest, UnevenRanksAreAFindingNamingRankBytesAndSite) {
  make_rank(path("a.db"), 0, 2, 4 * MiB);
  make_rank(path("b.db"), 1, 2, 12 * MiB);  // 8 MiB more of warmup's activations
  const an::Trace a = an::Trace::open(path("a.db")), b = an::Trace::open(path("b.db"));
  std::vector<diag::Finding> f = imbalance(a, b);
  ASSERT_EQ(f.size(), 1u);  // reserved is even (64 MiB on both)
  EXPECT_EQ(f[0].id, "rank-imbalance");
  EXPECT_EQ(f[0].device, "rank1/cpu");
  EXPECT_EQ(f[0].bytes, int64_t(8 * MiB));  // 20 MiB - 12 MiB
  EXPECT_EQ(f[0].site, "warmup (train.py:30)");
  EXPECT_DOUBLE_EQ(f[0].share, 8.0 / 20.0);
  EXPECT_EQ(f[0].severity, diag::Severity::major);  // 40% of the high rank's peak
  bool category = false;
  for (const auto& [what, value] : f[0].evidence)
    category =
        category || (what == "category making the difference" && value == "activation: +8.00 MiB");
  EXPECT_TRUE(category);

  std::vector<an::RankSpread> s =
      an::rank_spreads(an::rank_devices(std::vector<an::RankedTrace>{{0, &a}, {1, &b}}));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].curve, st::Curve::allocated);
  EXPECT_EQ(s[0].high_rank, 1);
  EXPECT_EQ(s[0].high_bytes, int64_t(20 * MiB));
  EXPECT_EQ(s[0].low_bytes, int64_t(12 * MiB));
  EXPECT_DOUBLE_EQ(s[0].ratio(), 20.0 / 12.0);
  ASSERT_TRUE(s[0].site);
  EXPECT_EQ(s[0].site->delta(), int64_t(8 * MiB));
  EXPECT_EQ(s[1].curve, st::Curve::reserved);
  EXPECT_EQ(s[1].high_bytes, s[1].low_bytes);
  EXPECT_FALSE(s[1].site);
}

TEST_F(RanksTest, EvenRanksAndSmallDifferencesAreNoFinding) {
  make_rank(path("a.db"), 0, 2, 4 * MiB);
  make_rank(path("b.db"), 1, 2, 4 * MiB);
  make_rank(path("c.db"), 1, 2, 4 * MiB + 512 * 1024);  // 0.5 MiB: under kImbalanceMinBytes
  const an::Trace a = an::Trace::open(path("a.db")), b = an::Trace::open(path("b.db")),
                  c = an::Trace::open(path("c.db"));
  EXPECT_TRUE(imbalance(a, b).empty());
  EXPECT_TRUE(imbalance(a, c).empty());
  // One rank's trace alone: the detector says why it cannot run.
  diag::Diagnosis d = diag::diagnose(a, {"rank-imbalance"});
  EXPECT_TRUE(d.findings.empty());
  ASSERT_EQ(d.skipped.size(), 1u);
  EXPECT_EQ(d.skipped[0].id, "rank-imbalance");
}

TEST_F(RanksTest, MergedTraceHasADevicePerRankWithEachRanksPeakToTheByte) {
  // Rank 1 started 3 ms after rank 0 (wall clock); both event clocks start at 1000.
  make_rank(path("run-0.db"), 0, 2, 4 * MiB, 1'000'000'000);
  make_rank(path("run-1.db"), 1, 2, 12 * MiB, 1'003'000'000);
  an::MergeResult r = an::merge_ranks({path("run-1.db"), path("run-0.db")}, path("all.db"));
  EXPECT_EQ(r.world_size, 2);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].rank, 0);
  EXPECT_EQ(r.ranks[1].offset_ns, 3'000'000);
  EXPECT_TRUE(r.warnings.empty());

  const an::Trace m = an::Trace::open(path("all.db"));
  ASSERT_EQ(m.devices().size(), 2u);
  EXPECT_EQ(m.devices()[0].name, "rank0/cpu");
  EXPECT_EQ(m.devices()[1].name, "rank1/cpu");
  EXPECT_EQ(m.device("rank1/cpu").id, m.devices()[1].id);
  EXPECT_EQ(an::peak(m, m.devices()[0].id)->bytes, int64_t(12 * MiB));
  EXPECT_EQ(an::peak(m, m.devices()[1].id)->bytes, int64_t(20 * MiB));
  EXPECT_EQ(an::peak(m, m.devices()[1].id, st::Curve::reserved)->bytes, int64_t(64 * MiB));
  // Rank 1's peak (t=3000 on its clock) lands 3 ms later on the merged clock.
  EXPECT_EQ(an::peak(m, m.devices()[1].id)->ts_ns, 3000u + 3'000'000u);
  EXPECT_EQ(an::peak(m, m.devices()[0].id)->ts_ns, 3000u);
  EXPECT_EQ(m.meta_int("world_size"), 2);
  // Sites survive the merge, and the merged trace is diagnosed like the pair.
  diag::Diagnosis d = diag::diagnose(m, {"rank-imbalance"});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].device, "rank1/cpu");
  EXPECT_EQ(d.findings[0].bytes, int64_t(8 * MiB));
  EXPECT_EQ(d.findings[0].site, "warmup (train.py:30)");
}

// Two ranks' steps interleave on the merged clock (rank 1 started 1 us later): each step still
// ends at its own rank's next step, and each rank's last step with the trace; a device's step
// statistics, timeline steps and step list are its rank's.
TEST_F(RanksTest, EachRanksStepsAreItsOwnInAMergedTrace) {
  for (int64_t rank : {0, 1}) {
    Builder t(path("run-" + std::to_string(rank) + ".db"), "train", rank, 2,
              1'000'000'000 + rank * 1000);
    t.block(ev::Kind::segment_alloc, 1000, 0x1000000, 64 * MiB, 1);
    t.step(1500, 0);
    t.alloc(2000, 0x1000000, MiB, 1, ev::Category::activation);
    t.step(3500, 1);
    t.free(4000, 0x1000000, MiB);
    t.finish(5000);
  }
  an::merge_ranks({path("run-0.db"), path("run-1.db")}, path("all.db"));
  const an::Trace m = an::Trace::open(path("all.db"));
  // (ts, end_ts or 0) in time order: rank 0 at 1500 and 3500, rank 1 at 2500 and 4500.
  std::vector<std::pair<uint64_t, uint64_t>> steps;
  st::detail::Stmt q(m.reader().db(), "SELECT ts, ifnull(end_ts, 0) FROM steps ORDER BY ts");
  while (q.step()) steps.emplace_back(q.u64(0), q.u64(1));
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {1500, 3500}, {2500, 4500}, {3500, 0}, {4500, 0}};
  EXPECT_EQ(steps, expected);

  // Note [Steps of a rank]: what is said of a device's steps uses its rank's two.
  for (const an::DeviceRef& d : m.devices()) {
    SCOPED_TRACE(d.name);
    const uint64_t first = 1500 + uint64_t(*d.rank) * 1000;
    std::vector<std::pair<int64_t, uint64_t>> spans;
    for (const an::StepSpan& s : an::steps_of(m, d.id)) spans.emplace_back(s.number, s.ts);
    EXPECT_EQ(spans, (std::vector<std::pair<int64_t, uint64_t>>{{0, first}, {1, first + 2000}}));
    const std::vector<an::StepStats> stats = an::step_stats(m, d.id);
    ASSERT_EQ(stats.size(), 2u);
    EXPECT_EQ(stats[0].duration_ns, 2000u);  // to the rank's own next step
    EXPECT_EQ(stats[0].alloc_count, 1u);     // its 1 MiB at 2000 (+1000 on rank 1)
    EXPECT_EQ(stats[0].alloc_bytes, int64_t(MiB));
    EXPECT_EQ(stats[1].alloc_count, 0u);
    EXPECT_EQ(an::timeline(m, d.id, {}).steps, spans);
  }
  EXPECT_EQ(an::steps_of(m, std::nullopt).size(), 4u);  // the trace's: every rank's
}

TEST_F(RanksTest, TracesNotOfOneRunAreRefused) {
  make_rank(path("a.db"), 0, 2, MiB);
  make_rank(path("b.db"), 0, 2, MiB);
  make_rank(path("c.db"), 1, 4, MiB);
  make_rank(path("norank.db"), std::nullopt, std::nullopt, MiB);
  auto refused = [&](std::vector<std::string> in) -> std::string {
    try {
      an::merge_ranks(in, path("out.db"));
    } catch (const an::MergeError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(
      refused({path("a.db"), path("b.db")}),
      path("a.db") + " and " + path("b.db") + ": both are rank 0; give each rank's trace once");
  EXPECT_EQ(refused({path("a.db"), path("c.db")}),
            path("a.db") + " and " + path("c.db") + ": not of one run (world size 2 and 4)");
  EXPECT_NE(refused({path("a.db"), path("norank.db")}).find("norank.db: has no rank"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path("out.db")));
}

TEST_F(RanksTest, AKilledRanksPartialTraceMergesWithAWarning) {
  make_rank(path("run-0.db"), 0, 2, 4 * MiB);
  make_rank(path("run-1.db"), 1, 2, 12 * MiB, 1'000'000'000, /*finish=*/false);
  an::MergeResult r = an::merge_ranks({path("run-0.db"), path("run-1.db")}, path("all.db"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(
      r.warnings[0].find("rank 1 (" + path("run-1.db") + "): the recording did not end cleanly"),
      std::string::npos);
  EXPECT_FALSE(r.ranks[1].complete);
  const an::Trace m = an::Trace::open(path("all.db"));
  // What rank 1 committed: its 20 MiB peak, and A never freed.
  EXPECT_EQ(an::peak(m, m.device("rank1/cpu").id)->bytes, int64_t(20 * MiB));
}

TEST(RankFromFileName, NumbersAfterRankOrTheOnlyNumber) {
  EXPECT_EQ(an::rank_from_file_name("/tmp/snapshot_rank3.pickle"), 3);
  EXPECT_EQ(an::rank_from_file_name("rank-1.pickle"), 1);
  EXPECT_EQ(an::rank_from_file_name("out/run-12.db"), 12);
  EXPECT_EQ(an::rank_from_file_name("job7_rank_2.pickle"), 2);  // "rank" decides
  EXPECT_FALSE(an::rank_from_file_name("snapshot.pickle"));
  EXPECT_THROW(an::rank_from_file_name("run-2024-3.pickle"), an::MergeError);
  EXPECT_THROW(an::rank_from_file_name("rank1_rank2.pickle"), an::MergeError);
}

}  // namespace
