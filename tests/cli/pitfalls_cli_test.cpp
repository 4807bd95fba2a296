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

using tl_test::tidemark;

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

// The pitfalls whose effect is a higher peak: a limit between the leaky and the fixed peak
// (from the programs' shapes: see tests/samples/pitfalls_test.cpp) fails the first, passes
// the second, and names the sample's own source file among the top contributors.
struct PeakGate {
  const char* sample;
  std::vector<std::string> limit;  // the check flags
  const char* failure;             // in the failure message
};

void expect_gate(const PeakGate& g) {
  const std::string leaky = record(g.sample, false), fixed = record(g.sample, true);
  std::vector<std::string> args{"check", leaky};
  args.insert(args.end(), g.limit.begin(), g.limit.end());
  Result r = tidemark(args);
  EXPECT_EQ(r.rc, 1) << g.sample << ": " << r.out << r.err;
  EXPECT_NE(r.out.find(g.failure), std::string::npos) << r.out;
  args[1] = fixed;
  r = tidemark(args);
  EXPECT_EQ(r.rc, 0) << g.sample << " --fixed: " << r.out << r.err;
}

TEST_F(PitfallsCli, RetainGraphRaisesThePeakOverTheFixedBaseline) {
  const std::string leaky = record("retain_graph", false), fixed = record("retain_graph", true);
  Result r = tidemark({"check", leaky, "--baseline", fixed, "--max-increase", "10"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("(retain_graph.cpp:"), std::string::npos) << r.out;
  r = tidemark({"check", fixed, "--baseline", fixed, "--max-increase", "10"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

TEST_F(PitfallsCli, EvalWithoutNoGradFailsAPeakLimit) {
  // Six saved 4 MiB activations (~35 MiB peak) against at most two live (~20 MiB).
  expect_gate(
      {"eval_without_no_grad", {"--max-peak-allocated", "28MiB"}, "(eval_without_no_grad.cpp:"});
}

TEST_F(PitfallsCli, FragmentationFailsAReservedLimit) {
  // ~130 MiB reserved for a 40 MiB allocated peak; expandable segments keep it near 62 MiB.
  expect_gate({"fragmentation", {"--max-peak-reserved", "96MiB"}, "peak reserved on cpu"});
}

TEST_F(PitfallsCli, CheckpointingPassesALimitThePlainStepFails) {
  expect_gate({"checkpointing", {"--max-peak-allocated", "32MiB"}, "(checkpointing.cpp:"});
  // And the diagnosis names it: activations are most of the plain step's peak.
  expect_gate({"checkpointing",
               {"--no-findings", "activation-peak"},
               "activation-peak on cpu at main (checkpointing.cpp:"});
}

TEST_F(PitfallsCli, TransposeContiguousFailsAPeakLimit) {
  // A and its 8 MiB copy live together (~16.8 MiB) against A alone (~8.8 MiB).
  expect_gate(
      {"transpose_contiguous", {"--max-peak-allocated", "12MiB"}, "(transpose_contiguous.cpp:"});
}

TEST_F(PitfallsCli, DataLoaderWorkersFailAPeakLimit) {
  // 32 batches of 3 MiB ahead (~105 MiB) against 4 (~19 MiB).
  expect_gate({"dataloader_workers", {"--max-peak-allocated", "64MiB"}, "peak allocated on cpu"});
}

TEST_F(PitfallsCli, EmptyCacheWithReferencedTensorsFailsTheCacheHeldGate) {
  // empty_cache() changes no peak here; what differs is whether it could release anything,
  // which is the cache-held diagnosis (docs/diagnoses.md).
  expect_gate({"empty_cache_referenced", {"--no-findings", "cache-held"}, "cache-held"});
}

}  // namespace
