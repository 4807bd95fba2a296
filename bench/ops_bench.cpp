// Elementwise add vs memcpy of the same bytes, and matmul through tensorlib vs OpenBLAS
// called directly.
#include <cblas.h>

#include <cstring>
#include <vector>

#include <tensorlib/tensorlib.h>

#include "bench_ratio.h"

namespace {

constexpr int64_t kAddElems = 16 << 20;  // 16M float32 = 64 MiB per operand
constexpr int64_t kMatN = 1024;

void BM_Memcpy64MiB(benchmark::State& state) {
  std::vector<float> src(kAddElems, 1.0f), dst(kAddElems, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kAddElems * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * sizeof(float));
}
BENCHMARK(BM_Memcpy64MiB)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_Add16MFloat32(benchmark::State& state) {
  tl::Tensor a = tl::ones({kAddElems}), b = tl::ones({kAddElems});
  for (auto _ : state) {
    tl::Tensor c = a + b;  // the output block comes back from the cache after the first step
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kAddElems * sizeof(float));
}
BENCHMARK(BM_Add16MFloat32)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_SgemmDirect(benchmark::State& state) {
  std::vector<float> a(kMatN * kMatN, 0.5f), b(kMatN * kMatN, 0.25f), c(kMatN * kMatN);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kMatN, kMatN, kMatN, 1.0f, a.data(),
                kMatN, b.data(), kMatN, 0.0f, c.data(), kMatN);
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_SgemmDirect)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_MatmulTensorlib(benchmark::State& state) {
  tl::Tensor a = tl::full({kMatN, kMatN}, 0.5), b = tl::full({kMatN, kMatN}, 0.25);
  for (auto _ : state) {
    tl::Tensor c = tl::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_MatmulTensorlib)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  return tidemark::bench::run_with_targets(
      argc, argv,
      {{"add of 16M float32: rate vs memcpy of the same bytes", "BM_Add16MFloat32",
        "BM_Memcpy64MiB", 0.5, false},
       {"1024x1024 float32 matmul: rate vs cblas_sgemm directly", "BM_MatmulTensorlib",
        "BM_SgemmDirect", 0.95, false}});
}
