// Autograd engine overhead: backward through a long chain of tiny ops (per node), and a
// 3-layer MLP's forward+backward against its forward alone.
#include <chrono>

#include <tensorlib/autograd/grad_mode.h>
#include <tensorlib/tensorlib.h>

#include "bench_ratio.h"

namespace {

constexpr int kChain = 10000;

void BM_BackwardChain10k(benchmark::State& state) {
  tl::Tensor x = tl::ones({1}, tl::kFloat64).requires_grad_();
  for (auto _ : state) {
    tl::Tensor y = x;
    for (int i = 0; i < kChain; ++i) y = y * 1.0001;
    tl::Tensor loss = y.sum();
    auto t0 = std::chrono::steady_clock::now();
    loss.backward();
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    x.mutable_grad() = tl::Tensor();
  }
}
BENCHMARK(BM_BackwardChain10k)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

struct Mlp {
  tl::Tensor w1 = (tl::randn({256, 512}) * 0.05).requires_grad_();
  tl::Tensor w2 = (tl::randn({512, 512}) * 0.05).requires_grad_();
  tl::Tensor w3 = (tl::randn({512, 10}) * 0.05).requires_grad_();
  tl::Tensor forward(const tl::Tensor& x) const {
    return tl::matmul(tl::matmul(tl::matmul(x, w1).relu(), w2).relu(), w3).log_softmax(1);
  }
};

void BM_MlpForward(benchmark::State& state) {
  tl::manual_seed(0);
  Mlp m;
  tl::Tensor x = tl::randn({64, 256});
  for (auto _ : state) benchmark::DoNotOptimize(m.forward(x).mean().item<float>());
}
BENCHMARK(BM_MlpForward)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_MlpForwardBackward(benchmark::State& state) {
  tl::manual_seed(0);
  Mlp m;
  tl::Tensor x = tl::randn({64, 256});
  for (auto _ : state) {
    tl::Tensor loss = -m.forward(x).mean();
    loss.backward();
    for (auto* w : {&m.w1, &m.w2, &m.w3}) w->mutable_grad() = tl::Tensor();
  }
}
BENCHMARK(BM_MlpForwardBackward)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  return tidemark::bench::run_with_targets(
      argc, argv,
      {{"3-layer MLP forward+backward vs forward (sanity bound; ~3x expected)",
        "BM_MlpForwardBackward", "BM_MlpForward", 5.0, true}},
      {{"backward through a chain of 10,000 tiny ops, per node", "BM_BackwardChain10k", 1000.0,
        kChain}});
}
