// `tidemark` as a CI gate on the pitfall samples: each leaky program, recorded with
// `tidemark record`, fails the check that catches its pitfall -- with a message naming the
// sample's own source line -- and its --fixed version passes the same check.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_program.h"

namespace {

namespace fs = std::filesystem;
using tl_test::Result;

fs::path dir() {
  return tl_test::temp_dir("tidemark_pitfalls_cli");
}

Result tidemark(std::vector<std::string> args) {
  args.insert(args.begin(), TIDEMARK_CLI);
  return tl_test::run(args);
}

// Records samples/pitfall_<name> (with --fixed when asked) and returns the trace's path.
std::string record(const std::string& name, bool fixed) {
  const std::string trace = (dir() / (name + (fixed ? "_fixed" : "") + ".db")).string();
  std::vector<std::string> args{"record",
                                "-o",
                                trace,
                                "--stacks",
                                "64",
                                "--",
                                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + name};
  if (fixed) args.push_back("--fixed");
  Result r = tidemark(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return trace;
}

class PitfallsCli : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove_all(dir()); }
};

TEST_F(PitfallsCli, SyncsPerStepGateCatchesItemInTheLoop) {
  const std::string leaky = record("sync_in_loop", false), fixed = record("sync_in_loop", true);
  Result r = tidemark({"check", leaky, "--max-syncs-per-step", "0"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL --max-syncs-per-step 0: at most 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("20 x main (sync_in_loop.cpp:"), std::string::npos) << r.out;
  // The fix reads the loss once, after the loop: no complete step waits on the device.
  r = tidemark({"check", fixed, "--max-syncs-per-step", "0"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;

  r = tidemark({"syncs", leaky, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["count"], 20);
  EXPECT_EQ(j["by_kind"]["item"], 20);
  r = tidemark({"syncs", fixed, "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["count"], 1);
}

TEST_F(PitfallsCli, PeakGateCatchesRetainedViewsAndNamesTheSite) {
  const std::string leaky = record("view_retention", false), fixed = record("view_retention", true);
  // 16 retained 4 MiB storages against one at a time with the fix.
  Result r = tidemark({"check", leaky, "--max-peak-allocated", "32MiB"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("peak allocated on cpu is 64.00 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("main (view_retention.cpp:"), std::string::npos) << r.out;
  r = tidemark({"check", fixed, "--max-peak-allocated", "32MiB"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

TEST_F(PitfallsCli, BaselineGateAndStepGrowthCatchTheAccumulatedLoss) {
  const std::string leaky = record("accumulated_loss", false),
                    fixed = record("accumulated_loss", true);
  Result r = tidemark({"check", leaky, "--baseline", fixed, "--max-increase", "50"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("grew most:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(accumulated_loss.cpp:"), std::string::npos) << r.out;
  r = tidemark({"check", fixed, "--baseline", fixed, "--max-increase", "50"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;

  // Live memory at the step boundaries grows by about one batch's saved activations
  // (at least the two 256 x 1024 float ReLU outputs) per step; with the fix it is flat.
  r = tidemark({"leaks", leaky, "--by-step", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json g = nlohmann::json::parse(r.out)["growth"]["cpu"];
  EXPECT_TRUE(g["growing"].get<bool>());
  EXPECT_GE(g["slope_bytes_per_step"].get<double>(), 2.0 * 256 * 1024 * 4);
  EXPECT_EQ(g["boundaries"].size(), 20u);
  r = tidemark({"leaks", fixed, "--by-step", "--json"});
  g = nlohmann::json::parse(r.out)["growth"]["cpu"];
  EXPECT_FALSE(g["growing"].get<bool>());
  EXPECT_LT(g["slope_bytes_per_step"].get<double>(), 4096.0);
}

}  // namespace
