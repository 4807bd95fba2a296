// `summary`, `check`, `diagnose` and `merge` over several ranks' traces, built by hand
// (analysis/trace_builder.h): rank 0 peaks at 12 MiB, rank 1 at 20 MiB (8 MiB more of warmup's
// activations), both reserve 64 MiB; bad input gives exit 2 and one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/trace_builder.h"
#include "profiler/store/trace_reader.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
using namespace analysis_test;
using tl_test::Result;
using tl_test::tidemark;

constexpr uint64_t MiB = uint64_t{1} << 20;

void make_rank(const std::string& path, std::optional<int64_t> rank, int64_t world, uint64_t b) {
  Builder t(path, "train", rank, world, 1'000'000'000);
  t.block(ev::Kind::segment_alloc, 1000, 0x1000000, 64 * MiB, 1);
  t.alloc(2000, 0x1000000, 8 * MiB, 1, ev::Category::parameter);
  t.alloc(3000, 0x1800000, b, 2, ev::Category::activation);
  t.free(4000, 0x1800000, b);
  t.free(5000, 0x1000000, 8 * MiB);
  st::FinalizeOptions options;
  options.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0xb1) return {{"warmup", "/src/train.py", 30, false, ""}};
    return {};
  };
  t.finish(5000, options);
}

class RanksCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tl_test::temp_dir("tidemark_ranks_cli");
    make_rank(at("run-0.db"), 0, 2, 4 * MiB);
    make_rank(at("run-1.db"), 1, 2, 12 * MiB);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST_F(RanksCliTest, SummaryShowsEachRankAndTheSpread) {
  Result r = tidemark({"summary", at("run-1.db"), at("run-0.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(
      r.out.find("cpu allocated               12.00 MiB    20.00 MiB  1.67x (rank 1 +8.00 MiB "
                 "over rank 0); site warmup (train.py:30) +8.00 MiB; activation +8.00 MiB"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cpu reserved                64.00 MiB    64.00 MiB  even"),
            std::string::npos)
      << r.out;
  Result j = tidemark({"summary", at("run-0.db"), at("run-1.db"), "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  nlohmann::json s = nlohmann::json::parse(j.out)["spread"][0];
  EXPECT_EQ(s["high_rank"], 1);
  EXPECT_EQ(s["low_rank"], 0);
  EXPECT_EQ(s["high_bytes"], 20 * MiB);
  EXPECT_EQ(s["low_bytes"], 12 * MiB);
  EXPECT_EQ(s["site"]["label"], "warmup (train.py:30)");
  EXPECT_EQ(s["site"]["delta_bytes"], 8 * MiB);
  EXPECT_EQ(s["category"]["key"], "activation");
}

TEST_F(RanksCliTest, CheckAppliesItsLimitsToEveryRank) {
  Result fail =
      tidemark({"check", at("run-0.db"), at("run-1.db"), "--max-peak-allocated", "16MiB"});
  EXPECT_EQ(fail.rc, 1) << fail.err;
  EXPECT_NE(fail.out.find("2 ranks: check failed on rank 1 (" + at("run-1.db") + ")"),
            std::string::npos)
      << fail.out;
  Result pass =
      tidemark({"check", at("run-0.db"), at("run-1.db"), "--max-peak-allocated", "20MiB"});
  EXPECT_EQ(pass.rc, 0) << pass.out;
  Result j = tidemark(
      {"check", at("run-0.db"), at("run-1.db"), "--max-peak-allocated", "16MiB", "--json"});
  nlohmann::json v = nlohmann::json::parse(j.out);
  EXPECT_EQ(v["passed"], false);
  EXPECT_EQ(v["failed_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(v["ranks"][0]["passed"], true);
}

TEST_F(RanksCliTest, DiagnoseFindsTheImbalanceOnAnUnevenPairOnly) {
  Result r =
      tidemark({"diagnose", at("run-0.db"), at("run-1.db"), "--json", "--only", "rank-imbalance"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json f = nlohmann::json::parse(r.out)["findings"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["id"], "rank-imbalance");
  EXPECT_EQ(f[0]["device"], "rank1/cpu");
  EXPECT_EQ(f[0]["bytes"], 8 * MiB);
  EXPECT_EQ(f[0]["site"], "warmup (train.py:30)");
  make_rank(at("even-1.db"), 1, 2, 4 * MiB);
  Result even = tidemark({"diagnose", at("run-0.db"), at("even-1.db"), "--json", "--all"});
  ASSERT_EQ(even.rc, 0) << even.err;
  const nlohmann::json even_findings =
      nlohmann::json::parse(even.out)["findings"];  // kept: the loop reads it
  for (const auto& x : even_findings) EXPECT_NE(x["id"], "rank-imbalance");
  // The merged trace says the same.
  ASSERT_EQ(tidemark({"merge", at("run-0.db"), at("run-1.db"), "-o", at("all.db")}).rc, 0);
  Result m = tidemark({"diagnose", at("all.db"), "--json", "--only", "rank-imbalance"});
  EXPECT_EQ(nlohmann::json::parse(m.out)["findings"][0]["device"], "rank1/cpu");
}

TEST_F(RanksCliTest, BadInputIsOneLineAndExit2) {
  make_rank(at("other-1.db"), 1, 4, MiB);
  const std::vector<std::vector<std::string>> cases = {
      {"summary", at("run-0.db"), at("missing.db")},
      {"summary", at("run-0.db"), at("other-1.db")},
      {"merge", at("run-0.db"), at("other-1.db"), "-o", at("x.db")},
      {"merge", at("run-0.db"), at("run-0.db"), "-o", at("x.db")},
      {"merge", at("run-0.db"), at("run-1.db"), "-o", at("run-0.db")},
      {"check", at("run-0.db"), at("missing.db"), "--max-leaked", "0"},
      {"diagnose", at("run-0.db"), at("other-1.db")},
  };
  for (const auto& c : cases) {
    Result r = tidemark(c);
    EXPECT_EQ(r.rc, 2) << c[0] << " " << c[2] << ": " << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
  Result w = tidemark({"merge", at("run-0.db"), at("other-1.db"), "-o", at("x.db")});
  EXPECT_NE(w.err.find("not of one run (world size 2 and 4)"), std::string::npos) << w.err;
  EXPECT_FALSE(fs::exists(at("x.db")));
}

TEST_F(RanksCliTest, ImportTakesSeveralRanksSnapshots) {
  const std::string tiny =
      std::string(TIDEMARK_TEST_DATA) + "/../importers/data/snapshot_tiny_p5.pkl";
  fs::copy_file(tiny, at("snapshot_rank0.pickle"));
  fs::copy_file(tiny, at("rank-1.pickle"));
  fs::copy_file(tiny, at("run-2024-3.pickle"));
  ASSERT_EQ(tidemark({"import", tiny, "-o", at("one.db")}).rc, 0);
  Result r =
      tidemark({"import", at("rank-1.pickle"), at("snapshot_rank0.pickle"), "-o", at("all.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto one = st::TraceReader::open(at("one.db"), st::TraceReader::Require::finalized);
  auto all = st::TraceReader::open(at("all.db"), st::TraceReader::Require::finalized);
  ASSERT_EQ(all.devices().size(), 2u);
  const auto own = one.devices()[0];
  for (int rank : {0, 1}) {
    const st::DeviceRow d = all.devices()[rank];
    EXPECT_EQ(d.info.rank, rank);
    EXPECT_EQ(d.info.rank_id, own.info.id);
    for (st::Curve c : {st::Curve::allocated, st::Curve::reserved})
      EXPECT_EQ(all.peak(d.id, c)->bytes, one.peak(own.id, c)->bytes);
  }
  Result s = tidemark({"summary", at("all.db"), "--json"});
  EXPECT_EQ(nlohmann::json::parse(s.out)["devices"][1]["device"], "rank1/cuda:0");
  // --rank for a single snapshot goes to the meta.
  ASSERT_EQ(tidemark({"import", tiny, "--rank", "3", "-o", at("three.db")}).rc, 0);
  EXPECT_EQ(st::TraceReader::open(at("three.db")).meta().rank, 3);
  Result bad = tidemark({"import", at("run-2024-3.pickle"), at("rank-1.pickle"), "-o", at("x.db")});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err, "tidemark: " + at("run-2024-3.pickle") +
                         ": its name has several numbers (2024, 3), so which is the rank is "
                         "ambiguous; name it rank-N or give --rank\n");
  EXPECT_FALSE(fs::exists(at("x.db")));
}

}  // namespace
