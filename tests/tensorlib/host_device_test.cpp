// HostDevice: aligned host segments, the optional capacity, and expandable segments backed by
// mmap; and the caching allocator running on it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/host_device.h"

namespace tl::memory {
namespace {

constexpr size_t MiB = size_t{1} << 20;

TEST(HostDevice, SegmentsAreAlignedAndUsable) {
  HostDevice d;
  void* p = d.raw_alloc(2 * MiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % HostDevice::kAlignment, 0u);
  std::memset(p, 0xab, 2 * MiB);
  EXPECT_EQ(d.bytes_in_use(), 2 * MiB);
  d.raw_free(p, 2 * MiB);
  EXPECT_EQ(d.bytes_in_use(), 0u);
  EXPECT_GT(d.memory_info().total, 0u);
}

TEST(HostDevice, CapacityMakesAllocationsFail) {
  HostDevice d(3 * MiB);
  void* p = d.raw_alloc(2 * MiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(d.raw_alloc(2 * MiB), nullptr);
  MemoryInfo info = d.memory_info();
  EXPECT_EQ(info.total, 3 * MiB);
  EXPECT_EQ(info.free, MiB);
  d.raw_free(p, 2 * MiB);
  p = d.raw_alloc(3 * MiB);
  EXPECT_NE(p, nullptr);
  d.raw_free(p, 3 * MiB);
}

TEST(HostDevice, ExpandableRangeMapsAndUnmaps) {
  HostDevice d(8 * MiB);
  char* base = static_cast<char*>(d.reserve_range(64 * MiB));
  ASSERT_NE(base, nullptr);
  ASSERT_TRUE(d.map(base, 2 * MiB, 4 * MiB));
  std::memset(base + 2 * MiB, 1, 4 * MiB);
  EXPECT_FALSE(d.map(base, 8 * MiB, 6 * MiB));  // 4 + 6 > 8: over capacity
  d.unmap(base, 2 * MiB, 4 * MiB);
  EXPECT_EQ(d.bytes_in_use(), 0u);
  ASSERT_TRUE(d.map(base, 0, 8 * MiB));
  std::memset(base, 2, 8 * MiB);
  d.unmap(base, 0, 8 * MiB);
  d.release_range(base, 64 * MiB);
}

TEST(HostDevice, EventsCompleteImmediately) {
  HostDevice d;
  EventId e = d.record_event(3);
  EXPECT_TRUE(d.query_event(e));
}

TEST(HostCachingAllocator, MemoryIsWritableAndOomIsRecoverable) {
  for (bool expandable : {false, true}) {
    AllocatorConfig c;
    c.expandable_segments = expandable;
    CachingAllocator a(std::make_unique<HostDevice>(64 * MiB), c);
    DataPtr small = a.allocate(1000);
    DataPtr big = a.allocate(30 * MiB);
    std::memset(small.ptr, 1, 1000);
    std::memset(big.ptr, 2, 30 * MiB);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.ptr) % 512, 0u);
    EXPECT_THROW(a.allocate(40 * MiB), tl::OutOfMemoryError);
    a.deallocate(big);
    DataPtr again = a.allocate(40 * MiB);
    std::memset(again.ptr, 3, 40 * MiB);
    a.deallocate(again);
    a.deallocate(small);
    a.empty_cache();
    EXPECT_EQ(a.stats().reserved_bytes[0].current, 0);
  }
}

}  // namespace
}  // namespace tl::memory
