// Recording and reading the ranks of a real MPI run (mpirun, 2 ranks on this host): both ways
// of nesting `tidemark record` and mpirun give one trace per rank with its rank in the meta;
// summary, check and merge over them agree with each rank's own trace; a rank SIGKILLed mid-run
// leaves the other's trace whole and its own a readable prefix. Skipped where mpirun is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/store/trace_reader.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
namespace st = tidemark::store;
using tl_test::Result;
using tl_test::tidemark;

std::string mpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/mpirun";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

class RanksMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mpirun().empty())
      GTEST_SKIP() << "mpirun not installed (openmpi-bin): no MPI run to record";
    dir_ = tl_test::temp_dir("tidemark_ranks_mpi");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::vector<std::string> mpi(int ranks) {
    return {mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
  }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void expect_rank_meta(const std::string& path, int64_t rank, int64_t world) {
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  EXPECT_EQ(r.meta().rank, rank) << path;
  EXPECT_EQ(r.meta().world_size, world) << path;
  EXPECT_GT(r.event_count(), 0u) << path;
}

TEST_F(RanksMpiTest, MpirunStartsTheRecorders) {
  std::vector<std::string> argv = mpi(2);
  for (const std::string& a : std::vector<std::string>{
           TIDEMARK_CLI, "record", "-o", at("run-%r.db"), "--", TIDEMARK_TRAIN_MLP, "20"})
    argv.push_back(a);
  Result r = tl_test::run(argv);
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_rank_meta(at("run-0.db"), 0, 2);
  expect_rank_meta(at("run-1.db"), 1, 2);
}

TEST_F(RanksMpiTest, TheRecorderStartsMpirun) {
  std::vector<std::string> argv{TIDEMARK_CLI, "record", "-o", at("run-%r.db"), "--"};
  for (const std::string& a : mpi(2)) argv.push_back(a);
  argv.push_back(TIDEMARK_TRAIN_MLP);
  argv.push_back("20");
  Result r = tl_test::run(argv);
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_rank_meta(at("run-0.db"), 0, 2);
  expect_rank_meta(at("run-1.db"), 1, 2);  // finalized by the record that started mpirun
  EXPECT_NE(r.err.find("to " + at("run-1.db")), std::string::npos) << r.err;

  // summary side by side: each rank's column is its own trace's summary, to the byte.
  Result s = tidemark({"summary", at("run-0.db"), at("run-1.db"), "--json"});
  ASSERT_EQ(s.rc, 0) << s.err;
  nlohmann::json j = nlohmann::json::parse(s.out);
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (int rank : {0, 1}) {
    Result one = tidemark({"summary", at("run-" + std::to_string(rank) + ".db"), "--json"});
    ASSERT_EQ(one.rc, 0) << one.err;
    nlohmann::json own = nlohmann::json::parse(one.out);
    EXPECT_EQ(j["ranks"][rank]["rank"], rank);
    EXPECT_EQ(j["ranks"][rank]["summary"]["devices"], own["devices"]);
    auto reader = st::TraceReader::open(at("run-" + std::to_string(rank) + ".db"));
    const int64_t peak = reader.peak(reader.devices()[0].id, st::Curve::allocated)->bytes;
    EXPECT_EQ(j["spread"][0]["peaks"][rank]["bytes"], peak);
  }
  EXPECT_EQ(j["spread"][0]["device"], "cpu");
  EXPECT_EQ(j["spread"][0]["curve"], "allocated");

  // merge: a device per rank, each with its rank's peaks to the byte.
  Result m = tidemark({"merge", at("run-0.db"), at("run-1.db"), "-o", at("all.db")});
  ASSERT_EQ(m.rc, 0) << m.err;
  auto merged = st::TraceReader::open(at("all.db"), st::TraceReader::Require::finalized);
  ASSERT_EQ(merged.devices().size(), 2u);
  for (int rank : {0, 1}) {
    auto own = st::TraceReader::open(at("run-" + std::to_string(rank) + ".db"));
    const st::DeviceRow d = merged.devices()[rank];
    EXPECT_EQ(d.info.rank, rank);
    EXPECT_EQ(d.info.name, "rank" + std::to_string(rank) + "/cpu");
    for (st::Curve c : {st::Curve::allocated, st::Curve::reserved, st::Curve::active})
      EXPECT_EQ(merged.peak(d.id, c)->bytes, own.peak(own.devices()[0].id, c)->bytes);
    EXPECT_EQ(merged.allocations(d.id).size(), own.allocations(own.devices()[0].id).size());
  }
  Result ms = tidemark({"summary", at("all.db"), "--json"});
  ASSERT_EQ(ms.rc, 0) << ms.err;
  EXPECT_EQ(nlohmann::json::parse(ms.out)["devices"][1]["device"], "rank1/cpu");
}

TEST_F(RanksMpiTest, RanksSharingOneFileAreRefused) {
  std::vector<std::string> argv = mpi(2);
  for (const std::string& a : std::vector<std::string>{TIDEMARK_CLI, "record", "-o", at("run.db"),
                                                       "--", TIDEMARK_TRAIN_MLP, "5"})
    argv.push_back(a);
  Result r = tl_test::run(argv);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("-o " + at("run.db") +
                       ": the 2 ranks of this run (OMPI_COMM_WORLD_SIZE=2) "
                       "would all write this one file; put %r (the rank) in the name"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(at("run.db")));
}

TEST_F(RanksMpiTest, AKilledRankLeavesTheOthersWholeAndItsOwnAPrefix) {
  // Rank 1 records without finalizing until it is SIGKILLed; rank 0 records train_mlp.
  const std::string script =
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then "
      "  " +
      tl_test::quote(TIDEMARK_CRASH_CHILD) + " " + tl_test::quote(at("run-%r.db")) + " > " +
      tl_test::quote(at("ready")) +
      " & child=$!; "
      "  while ! grep -q ready " +
      tl_test::quote(at("ready")) +
      " 2>/dev/null; do sleep 0.05; done; "
      "  kill -9 $child; wait $child; exit 0; "
      "else TIDEMARK_OUTPUT=" +
      tl_test::quote(at("run-%r.db")) + " " + tl_test::quote(TIDEMARK_TRAIN_MLP) + " 20; fi";
  std::vector<std::string> argv = mpi(2);
  for (const std::string& a : std::vector<std::string>{"sh", "-c", script}) argv.push_back(a);
  Result r = tl_test::run(argv);
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_rank_meta(at("run-0.db"), 0, 2);
  auto killed = st::TraceReader::open(at("run-1.db"));  // raw: the committed prefix
  EXPECT_FALSE(killed.clean_end());
  EXPECT_FALSE(killed.finalized());
  EXPECT_EQ(killed.meta().rank, 1);
  size_t steps = 0;
  killed.for_each_event([&](const tidemark::events::Event& e, uint64_t) {
    steps += e.kind == tidemark::events::Kind::step;
  });
  EXPECT_GE(steps, 50u);  // "ready" came after 50 committed steps

  Result m = tidemark({"merge", at("run-0.db"), at("run-1.db"), "-o", at("all.db")});
  ASSERT_EQ(m.rc, 0) << m.err;
  EXPECT_NE(m.err.find("rank 1 (" + at("run-1.db") + "): the recording did not end cleanly"),
            std::string::npos)
      << m.err;
  Result s = tidemark({"summary", at("all.db")});
  EXPECT_EQ(s.rc, 0) << s.err;
  EXPECT_NE(s.out.find("rank1/cpu"), std::string::npos);
}

}  // namespace
