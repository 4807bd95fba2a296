// Cached alloc+free pairs vs glibc malloc+free of the same sizes, with no sink and with a
// no-op sink installed (the cost of instrumentation when a profiler is attached).
#include <cstdlib>
#include <random>
#include <vector>

#include "bench_ratio.h"
#include "profiler/events/events.h"
#include "tensorlib/memory/allocator.h"

namespace {

// Sizes of the tensors of a small convolutional network's training step: activations,
// weights and gradients from 512 B to 8 MiB.
std::vector<size_t> tensor_sizes() {
  std::mt19937_64 rng(1);
  std::vector<size_t> sizes;
  for (int i = 0; i < 256; ++i) {
    int log2 = 9 + static_cast<int>(rng() % 15);  // 512 B .. 8 MiB
    sizes.push_back((size_t{1} << log2) + rng() % 4096);
  }
  return sizes;
}

const std::vector<size_t> kSizes = tensor_sizes();

void BM_MallocFree(benchmark::State& state) {
  std::vector<void*> live(8, nullptr);
  size_t i = 0;
  for (auto _ : state) {
    // Keep a few blocks live so both allocators work with a non-empty heap.
    size_t slot = i % live.size();
    std::free(live[slot]);
    live[slot] = std::malloc(kSizes[i % kSizes.size()]);
    benchmark::DoNotOptimize(live[slot]);
    ++i;
  }
  for (void* p : live) std::free(p);
}
BENCHMARK(BM_MallocFree)->Repetitions(7)->ReportAggregatesOnly(true);

void cached_pairs(benchmark::State& state) {
  auto* alloc = tl::memory::get_allocator(tl::Device("cpu"));
  std::vector<tl::memory::DataPtr> live(8);
  size_t i = 0;
  for (auto _ : state) {
    size_t slot = i % live.size();
    if (live[slot].ptr) alloc->deallocate(live[slot]);
    live[slot] = alloc->allocate(kSizes[i % kSizes.size()]);
    benchmark::DoNotOptimize(live[slot].ptr);
    ++i;
  }
  for (auto& p : live)
    if (p.ptr) alloc->deallocate(p);
}

void BM_CachedAllocFree(benchmark::State& state) {
  cached_pairs(state);
}
BENCHMARK(BM_CachedAllocFree)->Repetitions(7)->ReportAggregatesOnly(true);

class NoopSink final : public tidemark::events::Sink {
 public:
  void on_event(const tidemark::events::Event& e) noexcept override {
    benchmark::DoNotOptimize(&e);
  }
};

void BM_CachedAllocFreeNoopSink(benchmark::State& state) {
  NoopSink sink;
  tidemark::events::add_sink(&sink);
  cached_pairs(state);
  tidemark::events::remove_sink(&sink);
}
BENCHMARK(BM_CachedAllocFreeNoopSink)->Repetitions(7)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  return tidemark::bench::run_with_targets(
      argc, argv,
      {{"cached alloc+free vs glibc malloc+free (no sink)", "BM_CachedAllocFree", "BM_MallocFree",
        2.0, true},
       {"cached alloc+free with a no-op sink vs no sink", "BM_CachedAllocFreeNoopSink",
        "BM_CachedAllocFree", 1.2, true}});
}
