// CUPTI cannot start on a machine without a CUDA driver: InitializeInjection prints one line
// naming the reason, and the program runs on with its own exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "profiler/store/trace_reader.h"
#include "tests/run_program.h"

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
  tl_test::Result r =
      tl_test::run({TIDEMARK_INIT_PROBE}, {"TIDEMARK_OUTPUT=" + trace}, {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.rc, 3);
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
  tl_test::Result r = tl_test::run({TIDEMARK_INIT_PROBE},
                                   {"TIDEMARK_OUTPUT=" + trace, "TIDEMARK_CUPTI_PATH=libm.so.6"},
                                   {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.rc, 3);
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
  tl_test::Result r =
      tl_test::run({TIDEMARK_INIT_PROBE},
                   {"TIDEMARK_OUTPUT=" + trace,
                    std::string("TIDEMARK_CUPTI_PATH=") + TIDEMARK_FAKE_CUPTI, "FAKE_CUPTI_BUSY=1"},
                   {"TIDEMARK_ROOT_PID"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_EQ(r.out, "InitializeInjection: 1 1\n");
  EXPECT_EQ(r.err,
            "tidemark: CUDA memory not recorded, the program runs on: cuptiSubscribe failed: "
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another CUPTI tool - torch.profiler, "
            "Nsight, compute-sanitizer - holds it)\n");
  std::filesystem::remove(trace);
}

// The whole path inside a real process, without a driver: InitializeInjection subscribes to the
// stand-in libcupti, the program's cudaMalloc reaches the callback, its MEMORY2 record comes
// back through the buffer callbacks, and at exit the trace (finalized by the process itself)
// has the allocation with the stack of the function that made the call.
TEST(InterposeInit, CallSitesEndToEndThroughAStandInCupti) {
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("tidemark_init4_" + std::to_string(getpid()) + ".db"))
                                .string();
  tl_test::Result r = tl_test::run({TIDEMARK_CUPTI_PROBE},
                                   {"TIDEMARK_OUTPUT=" + trace, "TIDEMARK_STACKS=8",
                                    std::string("TIDEMARK_CUPTI_PATH=") + TIDEMARK_FAKE_CUPTI},
                                   {"TIDEMARK_ROOT_PID", "FAKE_CUPTI_BUSY"});
  EXPECT_EQ(r.rc, 3) << r.out << r.err;
  EXPECT_EQ(r.out, "InitializeInjection: 1\n");
  EXPECT_EQ(r.err, "");
  // One segment, whose innermost frame is the program's: CUPTI's (the stand-in's) frames and
  // the library's own are dropped.
  const auto t =
      tidemark::store::TraceReader::open(trace, tidemark::store::TraceReader::Require::finalized);
  int segments = 0;
  for (const auto& e : t.events()) {
    if (e.event.kind != tidemark::events::Kind::segment_alloc) continue;
    ++segments;
    EXPECT_EQ(e.event.block.addr, 0x7f0000000000u);
    EXPECT_EQ(e.event.block.size, 2u << 20);
    const std::vector<uint64_t> ips = t.stack(e.stack_id);
    ASSERT_FALSE(ips.empty());
    const auto frames = t.frames(ips.front());
    ASSERT_FALSE(frames.empty());
    EXPECT_THAT(frames.back().function, ::testing::HasSubstr("program_allocates_device_memory"));
  }
  EXPECT_EQ(segments, 1);
  std::filesystem::remove(trace);
}

}  // namespace
