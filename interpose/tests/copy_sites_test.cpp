// Note [Every copy has a call site] (interpose/callbacks.cpp): enable() asks CUPTI for the
// calls' names (here a stand-in that knows four) and traces every copy among them; the records
// of those copies then carry the stack of the function that made the call.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "interpose/activity.h"
#include "interpose/callbacks.h"
#include "interpose/cupti_api.h"
#include "interpose/tests/synthetic_cupti.h"
#include "profiler/record/recorder.h"
#include "profiler/store/trace_reader.h"

namespace ia = tidemark::interpose::activity;
namespace cb = tidemark::interpose::callbacks;
namespace ev = tidemark::events;
using namespace tidemark::interpose::testing;

namespace {

constexpr CUpti_CallbackDomain kRt = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr CUpti_CallbackDomain kDrv = CUPTI_CB_DOMAIN_DRIVER_API;

// The functions of a stack, innermost first.
std::vector<std::string> functions(const tidemark::store::TraceReader& trace, uint64_t stack_id) {
  std::vector<std::string> out;
  for (uint64_t ip : trace.stack(stack_id))
    for (const auto& f : trace.frames(ip)) out.push_back(f.function);
  return out;
}

std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> g_enabled;

CUptiResult enable_callback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                            CUpti_CallbackId cbid) {
  g_enabled.emplace_back(domain, cbid);
  return CUPTI_SUCCESS;
}

CUptiResult callback_name(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (domain == kRt && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020) {
    *name = "cudaMemcpy2D_v3020";
  } else if (domain == kRt && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
  } else if (domain == kDrv && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2) {
    *name = "cuMemcpyDtoD_v2";
  } else if (domain == kDrv && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
    *name = "cuLaunchKernel";
  } else {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

[[gnu::noinline]] void program_copies_a_2d_region(uint32_t rt) {
  auto enter = callback_data(CUPTI_API_ENTER, rt), exit = callback_data(CUPTI_API_EXIT, rt);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020, &exit);
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void program_copies_through_the_driver(uint32_t drv) {
  auto enter = callback_data(CUPTI_API_ENTER, drv), exit = callback_data(CUPTI_API_EXIT, drv);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, &enter);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, &exit);
  asm volatile("" ::: "memory");
}

TEST(InterposeCallbacks, EveryCopyGetsItsCallSite) {
  tidemark::interpose::CuptiApi api;
  api.EnableCallback = enable_callback;
  api.GetCallbackName = callback_name;
  g_enabled.clear();
  const int enabled = cb::enable(api, nullptr);
  EXPECT_EQ(enabled, static_cast<int>(g_enabled.size()));
  auto is_enabled = [](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    return std::find(g_enabled.begin(), g_enabled.end(), std::pair{domain, cbid}) !=
           g_enabled.end();
  };
  EXPECT_TRUE(is_enabled(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020));
  EXPECT_TRUE(is_enabled(kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2));
  EXPECT_TRUE(is_enabled(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020));  // listed anyway
  EXPECT_FALSE(is_enabled(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_FALSE(is_enabled(kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tidemark_copies_" + std::to_string(getpid()) + ".db"))
                               .string();
  tidemark::record::Options options;
  options.path = path;
  options.stack_depth = 8;
  tidemark::record::start(options);
  ASSERT_TRUE(ia::start(/*with_cupti=*/false));
  cb::configure(options.stack_depth, nullptr);
  std::thread program([&] {
    program_copies_a_2d_region(901);
    program_copies_through_the_driver(902);
  });
  program.join();
  const uint64_t t = ev::now_ns() + 1000;
  Buffer b;
  memcpy_rec(b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
             CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, false, 8192, t + 100, t + 150, 0, 1,
             CUPTI_INVALID_STREAM_ID)
      .correlationId = 901;
  memcpy_rec(b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
             CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, false, 16384, t + 200, t + 250, 0, 1,
             CUPTI_INVALID_STREAM_ID)
      .correlationId = 902;
  b.complete();
  ia::stop();
  tidemark::record::stop();

  auto trace = tidemark::store::TraceReader::open(path);
  std::map<uint64_t, std::string> innermost;  // memcpy bytes -> innermost function
  for (const auto& r : trace.events())
    if (r.event.kind == ev::Kind::memcpy) {
      const auto fns = functions(trace, r.stack_id);
      innermost[r.event.memcpy.bytes] =
          fns.empty() ? "" : fns.front().substr(0, fns.front().find('(', 1));
    }
  EXPECT_EQ(innermost[8192], "(anonymous namespace)::program_copies_a_2d_region");
  EXPECT_EQ(innermost[16384], "(anonymous namespace)::program_copies_through_the_driver");
  std::filesystem::remove(path);
}

}  // namespace
