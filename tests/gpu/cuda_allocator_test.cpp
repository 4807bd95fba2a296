// The caching allocator on a real CUDA device: segments, pools, splitting, deferred frees
// across streams, OOM (real and with a memory fraction) and expandable segments. Each test
// builds its own allocator over a CudaDevice, so the process-wide one stays untouched.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "gpu_test_util.h"
#include "tensorlib/cuda/cuda.h"
#include "tensorlib/cuda/cuda_device.h"
#include "tensorlib/memory/caching_allocator.h"

namespace tl {
namespace {

using gpu_test::EventLog;
using memory::CachingAllocator;
constexpr size_t MiB = size_t{1} << 20;

std::unique_ptr<CachingAllocator> make_allocator(memory::AllocatorConfig config = {}) {
  return std::make_unique<CachingAllocator>(std::make_unique<cuda::detail::CudaDevice>(0), config);
}

int64_t all(const memory::StatArray& a) {
  return a[static_cast<size_t>(memory::StatType::all)].current;
}

// Keeps `stream` busy for `ms` milliseconds without a kernel.
void busy(uint64_t stream, int ms) {
  static int delay;
  delay = ms;
  ASSERT_EQ(cudaLaunchHostFunc(
                reinterpret_cast<cudaStream_t>(stream),
                [](void* d) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(d)));
                },
                &delay),
            cudaSuccess);
}

TEST(CudaAllocator, SegmentsFollowThePoolSizes) {
  TL_REQUIRE_GPU();
  auto a = make_allocator();
  memory::DataPtr small = a->allocate(1000);               // small pool: a 2 MiB segment
  memory::DataPtr mid = a->allocate(5 * MiB);              // large, < 10 MiB: a 20 MiB segment
  memory::DataPtr big = a->allocate(29 * MiB + 1);         // large: rounded to 30 MiB
  ASSERT_EQ(cudaMemset(small.ptr, 1, 1000), cudaSuccess);  // real device memory
  ASSERT_EQ(cudaMemset(big.ptr, 1, 29 * MiB + 1), cudaSuccess);
  memory::DeviceStats s = a->stats();
  EXPECT_EQ(all(s.reserved_bytes), static_cast<int64_t>((2 + 20 + 30) * MiB));
  EXPECT_EQ(all(s.segment), 3);
  EXPECT_EQ(s.num_device_alloc, 3);
  a->deallocate(small);
  a->deallocate(mid);
  a->deallocate(big);
  EXPECT_EQ(all(a->stats().allocated_bytes), 0);
  a->empty_cache();
  EXPECT_EQ(all(a->stats().reserved_bytes), 0);
}

TEST(CudaAllocator, SplitsAndReusesBlocks) {
  TL_REQUIRE_GPU();
  auto a = make_allocator();
  memory::DataPtr x = a->allocate(512);
  memory::DataPtr y = a->allocate(512);
  EXPECT_EQ(static_cast<char*>(y.ptr) - static_cast<char*>(x.ptr), 512);  // one split segment
  void* first = x.ptr;
  a->deallocate(x);
  memory::DataPtr z = a->allocate(300);
  EXPECT_EQ(z.ptr, first);  // best fit reuses the freed front block
  EXPECT_EQ(a->stats().num_device_alloc, 1);
  a->deallocate(y);
  a->deallocate(z);
}

TEST(CudaAllocator, FreesAreDeferredAcrossStreams) {
  TL_REQUIRE_GPU();
  EventLog log;
  auto a = make_allocator();
  const cuda::Stream side = cuda::get_stream_from_pool(Device("cuda:0"));
  memory::DataPtr p = a->allocate(4096, 0);
  busy(side.id(), 300);  // the side stream "uses" the block for 300 ms
  a->record_stream(p, side.id());
  void* addr = p.ptr;
  a->deallocate(p);
  memory::DeviceStats s = a->stats();
  EXPECT_EQ(all(s.allocated_bytes), 0);  // free_requested
  EXPECT_EQ(all(s.active_bytes), 4096);  // not free_completed while the side stream works
  memory::DataPtr q = a->allocate(4096, 0);
  EXPECT_NE(q.ptr, addr) << "a block still used by another stream was handed out";
  side.synchronize();
  memory::DataPtr r = a->allocate(8192, 0);  // processes the completed event first
  EXPECT_EQ(all(a->stats().active_bytes), 4096 + 8192);
  EXPECT_EQ(log.of(gpu_test::ev::Kind::free_completed).size(), 1u);
  a->deallocate(q);
  a->deallocate(r);
}

TEST(CudaAllocator, OutOfMemoryWithAMemoryFraction) {
  TL_REQUIRE_GPU();
  auto a = make_allocator();
  const memory::MemoryInfo info = a->device_interface().memory_info();
  a->set_memory_fraction(static_cast<double>(64 * MiB) / static_cast<double>(info.total));
  memory::DataPtr p = a->allocate(40 * MiB);
  try {
    a->allocate(40 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Out of memory on device cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("allowed"), std::string::npos) << m;
    EXPECT_EQ(e.device_total(), info.total);
  }
  EXPECT_EQ(a->stats().num_ooms, 1);
  a->deallocate(p);
}

TEST(CudaAllocator, OutOfMemoryBeyondTheDevice) {
  TL_REQUIRE_GPU();
  auto a = make_allocator();
  const memory::MemoryInfo info = a->device_interface().memory_info();
  EXPECT_THROW(a->allocate(info.total + 1024 * MiB), OutOfMemoryError);
  memory::DataPtr p = a->allocate(MiB);  // still usable afterwards
  a->deallocate(p);
}

TEST(CudaAllocator, ExpandableSegmentsGrowInPlace) {
  TL_REQUIRE_GPU();
  auto a = make_allocator(memory::AllocatorConfig::parse("expandable_segments:True"));
  ASSERT_TRUE(a->device_interface().supports_expandable())
      << "the device or driver lacks the VMM API";
  EventLog log;
  memory::DataPtr x = a->allocate(30 * MiB);
  memory::DataPtr y = a->allocate(30 * MiB);
  EXPECT_EQ(static_cast<char*>(y.ptr) - static_cast<char*>(x.ptr),
            static_cast<std::ptrdiff_t>(30 * MiB));        // the second grew the same range
  ASSERT_EQ(cudaMemset(x.ptr, 0, 60 * MiB), cudaSuccess);  // both mapped, contiguous
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(log.of(gpu_test::ev::Kind::segment_map).size(), 2u);
  memory::Snapshot snap = a->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_TRUE(snap.segments[0].is_expandable);
  a->deallocate(x);
  a->deallocate(y);
  a->empty_cache();
  EXPECT_EQ(all(a->stats().reserved_bytes), 0);
  EXPECT_GE(log.of(gpu_test::ev::Kind::segment_unmap).size(), 1u);
}

}  // namespace
}  // namespace tl
