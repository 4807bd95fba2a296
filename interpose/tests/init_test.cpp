// CUPTI cannot start on a machine without a CUDA driver: InitializeInjection prints one line
// naming the reason, and the program runs on with its own exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "interpose/tests/run_program.h"

using namespace tidemark::interpose::testing;
using ::testing::MatchesRegex;

namespace {

bool have_driver() {
  for (const char* p : {"/dev/nvidiactl", "/proc/driver/nvidia/version"})
    if (std::filesystem::exists(p)) return true;
  return false;
}

TEST(InterposeInit, WithoutDriverPrintsOneLineAndKeepsExitStatus) {
  if (have_driver()) GTEST_SKIP() << "a CUDA driver is present: gpu_check.sh covers this machine";
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("tidemark_init_" + std::to_string(getpid()) + ".db"))
                                .string();
  RunResult r =
      run_program({TIDEMARK_INIT_PROBE}, {"TIDEMARK_OUTPUT=" + trace}, {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "InitializeInjection: 1 1\n");
  // Exactly one line, naming the call that failed and why.
  EXPECT_THAT(r.err,
              MatchesRegex("tidemark: CUDA memory not recorded, the program runs on: "
                           "cuptiSubscribe failed: [A-Z_]+ \\(no usable CUDA driver\\?\\)\n"));
  std::filesystem::remove(trace);
}

TEST(InterposeInit, UnusableCuptiIsOneLineToo) {
  // TIDEMARK_CUPTI_PATH names a library that is not CUPTI: it is tried first and refused.
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("tidemark_init2_" + std::to_string(getpid()) + ".db"))
                                .string();
  RunResult r = run_program({TIDEMARK_INIT_PROBE},
                            {"TIDEMARK_OUTPUT=" + trace, "TIDEMARK_CUPTI_PATH=libm.so.6"},
                            {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "InitializeInjection: 1 1\n");
  EXPECT_EQ(r.err,
            "tidemark: CUDA memory not recorded, the program runs on: libm.so.6 is not a usable "
            "libcupti, or too old (no cuptiGetResultString)\n");
  std::filesystem::remove(trace);
}

TEST(InterposeInit, AnotherCuptiToolIsOneLineAndKeepsExitStatus) {
  // Another subscriber (torch.profiler, Nsight Systems, compute-sanitizer) holds CUPTI.
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("tidemark_init3_" + std::to_string(getpid()) + ".db"))
                                .string();
  RunResult r = run_program({TIDEMARK_INIT_PROBE},
                            {"TIDEMARK_OUTPUT=" + trace,
                             std::string("TIDEMARK_CUPTI_PATH=") + TIDEMARK_FAKE_CUPTI},
                            {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "InitializeInjection: 1 1\n");
  EXPECT_EQ(r.err,
            "tidemark: CUDA memory not recorded, the program runs on: cuptiSubscribe failed: "
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another CUPTI tool - torch.profiler, "
            "Nsight, compute-sanitizer - holds it)\n");
  std::filesystem::remove(trace);
}

}  // namespace
