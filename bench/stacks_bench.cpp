// The cost of capturing a 32-frame native stack (libunwind) and copying it out, as the
// recorder does per allocation event, against calling down the same 32 frames without one.
#include <cstring>

#include "bench_ratio.h"
#include "profiler/record/stacks.h"

namespace {

using tidemark::record::capture_stack;
using tidemark::record::kMaxStackDepth;

constexpr int kDepth = 32;

struct Sample {
  uint64_t ips[kMaxStackDepth];
  int n = 0;
};

// Recurses `depth` frames, then captures (or not) at the bottom. The asm barriers keep the
// calls real calls: no tail call, no folding of the recursion.
template <bool kCapture>
[[gnu::noinline]] int descend(int depth, Sample& s) {
  if (depth > 0) {
    int n = descend<kCapture>(depth - 1, s);
    asm volatile("" ::: "memory");
    return n;
  }
  if constexpr (kCapture) {
    s.n = capture_stack(s.ips, kDepth, 0);
  } else {
    s.n = kDepth;
  }
  asm volatile("" ::: "memory");
  return s.n;
}

// The recorder's copy of the captured frames into its event record.
void copy_out(const Sample& s, uint64_t* record) {
  std::memcpy(record, s.ips, sizeof(uint64_t) * s.n);
  benchmark::ClobberMemory();
}

void BM_Recurse32NoCapture(benchmark::State& state) {
  Sample s;
  uint64_t record[kMaxStackDepth] = {};
  for (auto _ : state) {
    descend<false>(kDepth, s);
    copy_out(s, record);
  }
}
BENCHMARK(BM_Recurse32NoCapture)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_Recurse32Capture32(benchmark::State& state) {
  Sample s;
  uint64_t record[kMaxStackDepth] = {};
  for (auto _ : state) {
    descend<true>(kDepth, s);
    copy_out(s, record);
  }
  if (s.n != kDepth) state.SkipWithError("captured fewer than 32 frames");
}
BENCHMARK(BM_Recurse32Capture32)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  // The recursion itself costs a few ns (the baseline, printed above); the target holds the
  // whole capture-and-copy to 1.5 us per event.
  return tidemark::bench::run_with_targets(
      argc, argv, {},
      {{"capture 32 frames + copy (incl. 32-deep recursion)", "BM_Recurse32Capture32", 1500.0}});
}
