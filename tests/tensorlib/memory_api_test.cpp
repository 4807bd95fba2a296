// The tl:: memory API over the process-wide CPU allocator, configured from the environment
// before its first use, and the allocator registry.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/memory.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"

namespace tl {
namespace {

constexpr size_t MiB = size_t{1} << 20;

// The CPU allocator is created on first use; set its environment before main runs.
const bool kEnvironmentSet = [] {
  setenv("TL_HOST_CAPACITY", std::to_string(64 * MiB).c_str(), 1);
  setenv("TL_ALLOC_CONF", "max_split_size_mb:48", 1);
  return true;
}();

TEST(MemoryApi, CpuAllocatorReadsTheEnvironment) {
  ASSERT_TRUE(kEnvironmentSet);
  memory::CachingAllocator* a = memory::caching_allocator(Device("cpu"));
  EXPECT_EQ(a->config().max_split_size, 48 * MiB);
  EXPECT_EQ(memory::get_allocator(Device("cpu")), memory::get_allocator(Device(kCPU, 0)));
  EXPECT_EQ(a->device(), Device(kCPU, 0));
}

TEST(MemoryApi, AllocatedAndReservedFollowTheCaller) {
  memory::Allocator* a = memory::get_allocator(Device("cpu"));
  empty_cache();
  reset_peak_memory_stats();
  int64_t base_allocated = memory_allocated();
  memory::DataPtr p = a->allocate(3 * MiB);
  EXPECT_EQ(memory_allocated() - base_allocated, int64_t(3 * MiB));
  EXPECT_GE(memory_reserved(), int64_t(20 * MiB));
  a->deallocate(p);
  EXPECT_EQ(memory_allocated(), base_allocated);
  EXPECT_EQ(max_memory_allocated() - base_allocated, int64_t(3 * MiB));
  EXPECT_GE(max_memory_reserved(), int64_t(20 * MiB));
  auto stats = memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), memory_allocated());
  EXPECT_EQ(stats.at("max_split_size"), int64_t(48 * MiB));
  empty_cache();
  synchronize();
  int64_t in_snapshot = 0;
  for (const auto& seg : memory_snapshot().segments) in_snapshot += int64_t(seg.total_size);
  EXPECT_EQ(memory_reserved(Device("cpu")), in_snapshot);
}

TEST(MemoryApi, OutOfMemoryOnTheHostIsCatchable) {
  memory::Allocator* a = memory::get_allocator(Device("cpu"));
  try {
    a->allocate(100 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("Out of memory on device cpu. Tried to allocate 100.00 MiB. Device cpu "
                        "has a total capacity of 64.00 MiB of which ",
                        0),
              0u)
        << msg;
    EXPECT_EQ(e.device_total(), 64 * MiB);
  }
  memory::DataPtr p = a->allocate(MiB);  // carries on
  EXPECT_NE(p.ptr, nullptr);
  a->deallocate(p);
  EXPECT_GE(memory_stats().at("num_ooms"), 1);
}

TEST(MemoryApi, MemoryFractionLimitsTheCpuAllocator) {
  memory::Allocator* a = memory::get_allocator(Device("cpu"));
  empty_cache();
  set_per_process_memory_fraction(0.25);  // 16 MiB: a 20 MiB segment no longer fits
  EXPECT_THROW(a->allocate(5 * MiB), OutOfMemoryError);
  set_per_process_memory_fraction(1.0);
  memory::DataPtr p = a->allocate(5 * MiB);
  a->deallocate(p);
}

TEST(MemoryApi, CudaNeedsARegisteredBackend) {
  try {
    memory::get_allocator(Device("cuda:99"));  // no machine has it, with or without CUDA
    FAIL() << "expected tl::Error";
  } catch (const Error& e) {
    // Without the backend nothing is registered; with it, its factory names the missing device.
    const char* expected = tl::detail::cuda_hooks() == nullptr
                               ? "CUDA backend not available in this build"
                               : "CUDA device cuda:99 is not available";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  memory::register_allocator_factory(kCUDA, [](Device::Index index) -> memory::Allocator* {
    return new memory::CachingAllocator(  // leaked like every registered allocator
        std::make_unique<memory::FakeDevice>(size_t{1} << 30, Device(kCUDA, index)));
  });
  memory::Allocator* a = memory::get_allocator(Device("cuda:1"));
  EXPECT_EQ(a, memory::get_allocator(Device(kCUDA, 1)));
  EXPECT_NE(a, memory::get_allocator(Device("cuda:2")));
  memory::DataPtr p = a->allocate(4096);
  EXPECT_EQ(memory_allocated(Device("cuda:1")), 4096);
  EXPECT_EQ(memory_allocated(Device("cuda:2")), 0);
  a->deallocate(p);
}

}  // namespace
}  // namespace tl
