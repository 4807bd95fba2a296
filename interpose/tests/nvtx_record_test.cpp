// NVTX injection end to end: `tidemark record` runs a program that uses NVTX and no CUDA; the
// trace's scopes and marks are checked exactly, for the program and for the child it spawns
// (which writes its own file, with its pid in the name).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "interpose/tests/trace_rows.h"
#include "tests/run_program.h"

using namespace tidemark::interpose::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("tidemark_nvtx_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

void expect_nvtx_rows(const std::string& path) {
  EXPECT_THAT(rows(path,
                   "SELECT n.text, p.text, s.depth, s.value, s.pop_ts > s.push_ts FROM scopes s "
                   "JOIN strings n ON n.id = s.name JOIN strings p ON p.id = s.path "
                   "ORDER BY s.push_seq"),
              ElementsAre("outer|outer|0|0|1", "inner|outer/inner|1|0|1", "load|load|0|0|1",
                          "registered step|registered step|0|1|1"));
  // The start/end range began inside "outer" and ended after it.
  EXPECT_THAT(rows(path,
                   "SELECT l.push_ts > o.push_ts AND l.push_ts < o.pop_ts AND l.pop_ts > o.pop_ts "
                   "FROM scopes l, scopes o WHERE l.name = (SELECT id FROM strings WHERE text = "
                   "'load') AND o.name = (SELECT id FROM strings WHERE text = 'outer')"),
              ElementsAre("1"));
  EXPECT_THAT(rows(path,
                   "SELECT s.text, m.value FROM marks m JOIN strings s ON s.id = m.name "
                   "ORDER BY m.seq"),
              ElementsAre("nvtx_category:0:3:io|3", "hello|0", "nvtx_domain:app|1", "dmark|1"));
  EXPECT_THAT(rows(path, "SELECT value FROM meta WHERE key = 'finalized'"), ElementsAre("1"));
}

TEST(InterposeNvtx, RecordedEndToEndWithChildProcess) {
  const auto dir = temp_dir();
  const std::string trace = (dir / "nvtx.db").string();
  tl_test::Result r = tl_test::run(
      {TIDEMARK_CLI, "record", "--no-stacks", "-o", trace, "--", TIDEMARK_NVTX_SAMPLE, "spawn"}, {},
      {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"});
  EXPECT_EQ(r.rc, 5) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tidemark: recorded ")) << r.err;
  int child = 0, child_status = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "%d %d", &child, &child_status), 2) << r.out;
  EXPECT_EQ(child_status, 5);
  expect_nvtx_rows(trace);
  const std::string child_trace = (dir / ("nvtx-" + std::to_string(child) + ".db")).string();
  ASSERT_TRUE(std::filesystem::exists(child_trace)) << child_trace;
  expect_nvtx_rows(child_trace);
  std::filesystem::remove_all(dir);
}

// NVTX ranges that mark steps (Note [Step ranges]): "step" by default, numbered in order or by
// the number in the name; --step-range picks another name; an empty one none.
TEST(InterposeNvtx, StepRangesBecomeSteps) {
  const auto dir = temp_dir();
  auto steps = [&](const std::vector<std::string>& options) {
    const std::string trace = (dir / "steps.db").string();
    std::vector<std::string> argv{TIDEMARK_CLI, "record", "--no-stacks", "-o", trace};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", TIDEMARK_NVTX_SAMPLE, "steps"});
    tl_test::Result r = tl_test::run(argv, {}, {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return rows(trace,
                "SELECT s.number, n.text, s.end_ts IS NOT NULL FROM steps s "
                "JOIN strings n ON n.id = s.name ORDER BY s.ts, s.seq");
  };
  EXPECT_THAT(steps({}), ElementsAre("1|step|1", "2|step|1", "3|step|1", "20|step 20|0"));
  EXPECT_THAT(steps({"--step-range", "ProfilerStep"}), ElementsAre("12|ProfilerStep#12|0"));
  EXPECT_THAT(steps({"--step-range", ""}), ElementsAre());
  std::filesystem::remove_all(dir);
}

TEST(InterposeNvtx, NoCudaTurnsInjectionOff) {
  const auto dir = temp_dir();
  const std::string trace = (dir / "off.db").string();
  tl_test::Result r =
      tl_test::run({TIDEMARK_CLI, "record", "--no-cuda", "-o", trace, "--", TIDEMARK_NVTX_SAMPLE},
                   {}, {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"});
  EXPECT_EQ(r.rc, 5) << r.err;
  EXPECT_THAT(r.err, HasSubstr("wrote no trace"));
  EXPECT_FALSE(std::filesystem::exists(trace));
  std::filesystem::remove_all(dir);
}

}  // namespace
