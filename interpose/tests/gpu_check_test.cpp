// The Python half of gpu_check.sh (gpu_check.py), run here against traces built as a PyTorch
// run would be recorded (callbacks on the training thread, synthetic activity records): the
// checks pass on a good trace and fail, naming the check, on a bad one. Only the GPU can say
// whether real traces pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "interpose/callbacks.h"
#include "interpose/tests/synthetic_cupti.h"
#include "profiler/events/annotate.h"
#include "profiler/record/recorder.h"
#include "tests/run_program.h"

namespace ia = tidemark::interpose::activity;
namespace cb = tidemark::interpose::callbacks;
namespace ev = tidemark::events;
namespace fs = std::filesystem;
using namespace tidemark::interpose::testing;
using ::testing::HasSubstr;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kDev = 0x7f0000000000, kVa = 0x7c0000000000;
constexpr int kSteps = 20;

[[gnu::noinline]] void training_step_calls(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                           uint32_t correlation, const void* params = nullptr) {
  auto enter = callback_data(CUPTI_API_ENTER, correlation, params);
  auto exit = callback_data(CUPTI_API_EXIT, correlation, params);
  cb::on_api(nullptr, domain, cbid, &enter);
  cb::on_api(nullptr, domain, cbid, &exit);
  asm volatile("" ::: "memory");
}

// A recorded "training run": per step an NVTX range and an async upload; a loss.item() sync
// every 10 steps; cudaMalloc'd segments of 2 MiB, and 20 MiB half-way, freed later (reserved
// peak 22 MiB) -- or with `expandable`, the same as cuMemMap'd ranges.
void record_training(const std::string& path, bool expandable) {
  tidemark::record::Options options;
  options.path = path;
  options.stack_depth = 8;
  tidemark::record::start(options);
  ASSERT_TRUE(ia::start(false));
  cb::configure(options.stack_depth, nullptr);
  const uint64_t t = ev::now_ns();
  uint32_t corr = 1;
  Buffer b;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop{};
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUdeviceptr va = kVa;
  cuMemAddressReserve_params reserve{&va, 64 * kMiB, 0, 0, 0};
  if (expandable) {
    training_step_calls(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
                        corr++, &reserve);
    cuMemCreate_params create{&handle, 2 * kMiB, &prop, 0};
    training_step_calls(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, corr++,
                        &create);
  }
  auto segment = [&](bool alloc, uint64_t addr, uint64_t size, uint64_t ts) {
    if (expandable) {
      if (alloc) {
        cuMemMap_params map{kVa + (addr - kDev), size, 0, handle, 0};
        training_step_calls(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, corr++,
                            &map);
      } else {
        cuMemUnmap_params unmap{kVa + (addr - kDev), size};
        training_step_calls(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, corr++,
                            &unmap);
      }
      return;
    }
    training_step_calls(
        CUPTI_CB_DOMAIN_RUNTIME_API,
        alloc ? CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
        corr);
    memory(b, alloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, addr, size, ts).correlationId = corr++;
  };
  segment(true, kDev, 2 * kMiB, t + 10);
  for (int i = 0; i < kSteps; ++i) {
    // What the injected NVTX handler emits for a "step" range: the step, then its scope.
    ev::emit_name(ev::Kind::step, "step", static_cast<uint64_t>(i + 1));
    ev::Scope step("step");
    const uint64_t at = t + 1000 * (i + 1);
    training_step_calls(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                        corr);
    memcpy_rec(b, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, true, 4096, at, at + 10, 0, 1, 7)
        .correlationId = corr++;
    if (i == kSteps / 2) segment(true, kDev + 2 * kMiB, 20 * kMiB, at + 20);
    if (i == kSteps / 2 + 2) segment(false, kDev + 2 * kMiB, 20 * kMiB, at + 20);
    if (i % 10 == 0) {
      training_step_calls(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
                          corr);
      memcpy_rec(b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, false, 4, at + 30, at + 40, 0, 1, 7)
          .correlationId = corr++;
    }
  }
  b.complete();
  ia::stop();
  tidemark::record::stop();
}

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path) << "some output of the program\n" << text << "\n";
  return path;
}

tl_test::Result check(const std::vector<std::string>& args) {
  // The targets are enforced here whatever the environment says (a first GPU run's
  // TIDEMARK_GPU_FIRST_RUN=1 only reports them).
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "TIDEMARK_GPU_FIRST_RUN", "python3",
                                   TIDEMARK_GPU_CHECK_PY};
  argv.insert(argv.end(), args.begin(), args.end());
  return tl_test::run(argv, {});
}

class GpuCheckPy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tl_test::run({"/usr/bin/env", "python3", "-c", "import sqlite3"}, {}).rc != 0)
      GTEST_SKIP() << "no python3 with sqlite3: gpu_check.py not checked";
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_ = fs::temp_directory_path() / ("tidemark-gpucheck-" + std::to_string(getpid()));
};

TEST_F(GpuCheckPy, TorchChecksPassOnAGoodTraceAndNameWhatFails) {
  record_training(file("torch.db"), false);
  const std::string run = R"({"max_reserved": 23068672, "loop_s": 1.05, "steps": 20})";
  const std::string plain = write(file("plain.json"), R"({"loop_s": 1.0})");
  tl_test::Result r = check({"torch", file("torch.db"), write(file("run.json"), run), plain});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok   reserved peak vs torch.cuda.max_memory_reserved(): recorded "
                               "23068672 B, torch 23068672 B, difference +0 B"));
  EXPECT_THAT(r.out, HasSubstr("ok   syncs on the training thread"));
  EXPECT_THAT(r.out, HasSubstr("ok   steps from the step ranges: 20 numbered 1 to 20"));
  EXPECT_THAT(r.out, HasSubstr("ok   loss.item() syncs with stacks: 2 copy_to_host syncs"));
  EXPECT_THAT(r.out, HasSubstr("ok   recording overhead (training loop wall time, target <= "
                               "1.10x): 1.050x"));

  // PyTorch saw 64 MiB more, and the recorded run was 20% slower: two checks fail.
  const std::string bad = R"({"max_reserved": 90177536, "loop_s": 1.2, "steps": 20})";
  r = check({"torch", file("torch.db"), write(file("bad.json"), bad), plain});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("FAIL reserved peak vs torch.cuda.max_memory_reserved(): recorded "
                               "23068672 B, torch 90177536 B, difference -67108864 B"));
  EXPECT_THAT(r.out, HasSubstr("FAIL recording overhead"));
}

TEST_F(GpuCheckPy, ExpandableSegmentsAreSeenFromTheMappings) {
  record_training(file("exp.db"), true);
  const std::string run = R"({"max_reserved": 23068672, "loop_s": 1.0, "steps": 20})";
  tl_test::Result r = check({"expandable", file("exp.db"), write(file("run.json"), run)});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("info expandable segments seen: 2 mapped ranges (cuMemMap), 0 "
                               "whole segments (cudaMalloc)"));
  EXPECT_THAT(r.out, HasSubstr("ok   expandable: reserved peak"));
}

}  // namespace
