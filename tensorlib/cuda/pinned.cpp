// Note [Pinned host cache]
// Page-locked host memory for pin_memory() and the DataLoader's pinned batches. A simpler
// scheme than the device allocator, documented as such (docs/cuda.md): blocks are rounded up to
// a power of two (at least 512 B), each is its own cudaHostAlloc, and a freed block is cached
// by size. An asynchronous copy that reads or writes a block records an event on its stream
// (pinned_record_use); a cached block is handed out again only once those events completed,
// as PyTorch's CachingHostAllocator does. The cache is never destroyed (no CUDA call at exit);
// empty_pinned_cache() returns reusable blocks with cudaFreeHost. Emits no allocator events:
// pinned memory is host memory and the trace's host device is the CPU allocator's.
#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "tensorlib/cuda/cuda.h"
#include "tensorlib/cuda/cuda_internal.h"

namespace tl::cuda {

namespace detail {

namespace {

struct PinnedBlock {
  size_t size = 0;
  bool in_use = false;
  std::vector<cudaEvent_t> events;  // copies still using the block
};

struct PinnedCache {
  std::mutex mu;
  std::map<uintptr_t, PinnedBlock> blocks;  // by address: every block, in use or cached
  std::multimap<size_t, void*> cached;      // size -> free block
  PinnedStats stats;
};

PinnedCache& cache() {
  static auto* c = new PinnedCache;  // never destroyed (Note [Pinned host cache])
  return *c;
}

// True when every copy recorded on the block has finished; drops the completed events.
bool ready(PinnedBlock& b) {
  while (!b.events.empty()) {
    cudaError_t err = cudaEventQuery(b.events.back());
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    (void)cudaEventDestroy(b.events.back());
    b.events.pop_back();
  }
  return true;
}

size_t round_pinned(size_t nbytes) {
  return std::bit_ceil(std::max<size_t>(nbytes, 512));
}

}  // namespace

void* pinned_alloc(size_t nbytes) {
  const size_t size = round_pinned(nbytes);
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto [lo, hi] = c.cached.equal_range(size);
  for (auto it = lo; it != hi; ++it) {
    PinnedBlock& b = c.blocks.at(reinterpret_cast<uintptr_t>(it->second));
    if (!ready(b)) continue;
    void* p = it->second;
    c.cached.erase(it);
    b.in_use = true;
    c.stats.allocated_bytes += static_cast<int64_t>(size);
    return p;
  }
  void* p = nullptr;
  TL_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
  c.blocks[reinterpret_cast<uintptr_t>(p)] = PinnedBlock{size, true, {}};
  c.stats.allocated_bytes += static_cast<int64_t>(size);
  c.stats.reserved_bytes += static_cast<int64_t>(size);
  c.stats.num_host_allocs += 1;
  return p;
}

void pinned_free(void* ptr) {
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == c.blocks.end() || !it->second.in_use) return;
  it->second.in_use = false;
  c.stats.allocated_bytes -= static_cast<int64_t>(it->second.size);
  c.cached.emplace(it->second.size, ptr);
}

void pinned_record_use(void* ptr, int device, uint64_t stream) {
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.blocks.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == c.blocks.begin()) return;
  --it;
  if (reinterpret_cast<uintptr_t>(ptr) >= it->first + it->second.size) return;  // not ours
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  TL_CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)));
  it->second.events.push_back(e);
}

}  // namespace detail

PinnedStats pinned_memory_stats() {
  detail::PinnedCache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void empty_pinned_cache() {
  detail::PinnedCache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto it = c.cached.begin(); it != c.cached.end();) {
    auto b = c.blocks.find(reinterpret_cast<uintptr_t>(it->second));
    if (!detail::ready(b->second)) {
      ++it;
      continue;
    }
    (void)cudaFreeHost(it->second);
    c.stats.reserved_bytes -= static_cast<int64_t>(b->second.size);
    c.blocks.erase(b);
    it = c.cached.erase(it);
  }
}

}  // namespace tl::cuda
