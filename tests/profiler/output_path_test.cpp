// Note [Output patterns]: %p, %r and %% in a trace's name, the rank from each launcher's
// variables, and a world of ranks refused one shared file. Expected names written by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "profiler/record/output_path.h"

namespace {

namespace rec = tidemark::record;

rec::EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(OutputPath, RankAndWorldSizeFromEachLauncher) {
  rec::RankEnv o =
      rec::rank_from_env(env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.variable, "OMPI_COMM_WORLD_RANK");
  rec::RankEnv p = rec::rank_from_env(env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 2);
  rec::RankEnv t =
      rec::rank_from_env(env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(t.rank, 5);
  EXPECT_EQ(t.world_size, 8);
  // OpenMPI's variables win over torchrun's when both are set; a size from another family
  // does not count.
  rec::RankEnv both =
      rec::rank_from_env(env({{"RANK", "7"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"WORLD_SIZE", "8"}}));
  EXPECT_EQ(both.rank, 0);
  EXPECT_FALSE(both.world_size);
  EXPECT_FALSE(rec::rank_from_env(env({})).rank);
  EXPECT_FALSE(rec::rank_from_env(env({{"RANK", "first"}})).rank);  // not a number: no rank
  EXPECT_FALSE(rec::rank_from_env(env({{"RANK", "-1"}})).rank);
}

TEST(OutputPath, ExpandsPidRankAndPercent) {
  rec::RankEnv r;
  r.rank = 2;
  r.world_size = 4;
  EXPECT_EQ(rec::expand_output_path("run-%r.db", 4321, r).path, "run-2.db");
  EXPECT_EQ(rec::expand_output_path("run-%r-%p.db", 4321, r).path, "run-2-4321.db");
  EXPECT_EQ(rec::expand_output_path("dir%r/t.db", 1, r).path, "dir2/t.db");
  EXPECT_EQ(rec::expand_output_path("100%%-%r.db", 1, r).path, "100%-2.db");
  EXPECT_EQ(rec::expand_output_path("a%%r.db", 1, r).path, "a%r.db");     // %% then a plain r
  EXPECT_EQ(rec::expand_output_path("a%x%.db%", 1, r).path, "a%x%.db%");  // others stay
  EXPECT_FALSE(rec::expand_output_path("run-%r.db", 1, r).rank_missing);
}

TEST(OutputPath, NoRankInTheEnvironmentIsZeroAndSaidSo) {
  rec::ExpandedPath x = rec::expand_output_path("run-%r.db", 9, rec::RankEnv{});
  EXPECT_EQ(x.path, "run-0.db");
  EXPECT_TRUE(x.rank_missing);
  EXPECT_FALSE(rec::expand_output_path("run-%p.db", 9, rec::RankEnv{}).rank_missing);
}

TEST(OutputPath, ManyRanksOneFileIsRefused) {
  rec::RankEnv r =
      rec::rank_from_env(env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(rec::shared_file_problem("run.db", r),
            "run.db: the 2 ranks of this run (OMPI_COMM_WORLD_SIZE=2) would all write this one "
            "file; put %r (the rank) in the name, e.g. run-%r.db");
  EXPECT_EQ(rec::shared_file_problem("run-%r.db", r), "");
  EXPECT_EQ(rec::shared_file_problem("run-%p.db", r), "");   // one file per process too
  EXPECT_NE(rec::shared_file_problem("run-%%r.db", r), "");  // a literal "%r" is no rank
  rec::RankEnv one = rec::rank_from_env(env({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_EQ(rec::shared_file_problem("run.db", one), "");
  EXPECT_EQ(rec::shared_file_problem("run.db", rec::RankEnv{}), "");
}

TEST(OutputPath, MatchesTheFilesRanksWrote) {
  EXPECT_TRUE(rec::matches_output_pattern("run-%r.db", "run-0.db"));
  EXPECT_TRUE(rec::matches_output_pattern("run-%r.db", "run-12.db"));
  EXPECT_FALSE(rec::matches_output_pattern("run-%r.db", "run-.db"));
  EXPECT_FALSE(rec::matches_output_pattern("run-%r.db", "run-0.db-wal"));
  EXPECT_FALSE(rec::matches_output_pattern("run-%r.db", "run-0.db.lock"));
  EXPECT_FALSE(rec::matches_output_pattern("run-%r.db", "run-x.db"));
  EXPECT_TRUE(rec::matches_output_pattern("r%r-%p.db", "r1-555.db", 555));
  EXPECT_FALSE(rec::matches_output_pattern("r%r-%p.db", "r1-556.db", 555));
  EXPECT_TRUE(rec::matches_output_pattern("50%%-%r.db", "50%-3.db"));
}

}  // namespace
