// One training step of the Fashion-MNIST models (samples/fashion_models.h) at batch 64 --
// zero_grad, forward, cross entropy, backward, Adam -- on synthetic batches of the dataset's
// shape. The ratio target bounds the MLP step against the matrix products it must do (its
// GEMMs called directly through BLAS), which is its framework overhead (PyTorch 2.15 measured
// 3.8x on a 2-core machine); the comparison with
// PyTorch on the same models, batch and threads is scripts/compare-pytorch.sh.
#include <cblas.h>

#include <chrono>

#include <tensorlib/nn/loss.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

#include "../samples/fashion_models.h"
#include "bench_ratio.h"

namespace {

constexpr int64_t kBatch = 64;

void step_loop(benchmark::State& state, const std::shared_ptr<tl::nn::Sequential>& model) {
  tl::manual_seed(0);
  tl::optim::Adam opt(model->parameters(), {.lr = 1e-3});
  tl::Tensor x = tl::randn({kBatch, 1, 28, 28});
  tl::Tensor y = tl::randint(0, 10, {kBatch});
  for (auto _ : state) {
    opt.zero_grad();
    tl::Tensor loss = tl::nn::functional::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_MlpStep(benchmark::State& state) {
  step_loop(state, samples::make_mlp());
}
BENCHMARK(BM_MlpStep)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_CnnStep(benchmark::State& state) {
  step_loop(state, samples::make_cnn());
}
BENCHMARK(BM_CnnStep)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

// Where a step's time goes: whole steps, each phase timed on its own and reported as a counter
// (ms per step), so the four add up to the step. PyTorch's figures for the same phases come
// from bench/pytorch/train_step.py --phases (docs/performance.md). The argument is Adam's
// `fused` (Note [Fused Adam]): 0 composes the update from ops.
void phases_loop(benchmark::State& state, const std::shared_ptr<tl::nn::Sequential>& model) {
  using clock = std::chrono::steady_clock;
  tl::manual_seed(0);
  tl::optim::Adam opt(model->parameters(), {.lr = 1e-3, .fused = state.range(0) != 0});
  tl::Tensor x = tl::randn({kBatch, 1, 28, 28});
  tl::Tensor y = tl::randint(0, 10, {kBatch});
  double sums[4] = {0, 0, 0, 0};
  for (auto _ : state) {
    const clock::time_point t0 = clock::now();
    opt.zero_grad();
    const clock::time_point t1 = clock::now();
    tl::Tensor loss = tl::nn::functional::cross_entropy((*model)(x), y);
    const clock::time_point t2 = clock::now();
    loss.backward();
    const clock::time_point t3 = clock::now();
    opt.step();
    const clock::time_point t4 = clock::now();
    const clock::time_point marks[] = {t0, t1, t2, t3, t4};
    for (int i = 0; i < 4; ++i)
      sums[i] += std::chrono::duration<double, std::milli>(marks[i + 1] - marks[i]).count();
  }
  const char* names[] = {"zero_grad_ms", "forward_ms", "backward_ms", "optimizer_ms"};
  for (int i = 0; i < 4; ++i)
    state.counters[names[i]] =
        benchmark::Counter(sums[i] / static_cast<double>(state.iterations()));
}

void BM_MlpPhases(benchmark::State& state) {
  phases_loop(state, samples::make_mlp());
}
BENCHMARK(BM_MlpPhases)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

void BM_CnnPhases(benchmark::State& state) {
  phases_loop(state, samples::make_cnn());
}
BENCHMARK(BM_CnnPhases)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

// The MLP step's matrix products alone: forward x W1^T, h W2^T; backward dW2, dH, dW1.
void BM_MlpGemms(benchmark::State& state) {
  std::vector<float> x(kBatch * 784, 0.5f), w1(256 * 784, 0.01f), h(kBatch * 256, 0.5f),
      w2(10 * 256, 0.01f), out(kBatch * 10), dw1(256 * 784), dw2(10 * 256), dh(kBatch * 256);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, 256, 784, 1, x.data(), 784,
                w1.data(), 784, 0, h.data(), 256);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, 10, 256, 1, h.data(), 256,
                w2.data(), 256, 0, out.data(), 10);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 10, 256, kBatch, 1, out.data(), 10,
                h.data(), 256, 0, dw2.data(), 256);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, 256, 10, 1, out.data(), 10,
                w2.data(), 256, 0, dh.data(), 256);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 256, 784, kBatch, 1, dh.data(), 256,
                x.data(), 784, 0, dw1.data(), 784);
    benchmark::DoNotOptimize(dw1.data());
  }
}
BENCHMARK(BM_MlpGemms)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  return tidemark::bench::run_with_targets(
      argc, argv,
      {{"MLP training step vs its GEMMs alone (framework overhead)", "BM_MlpStep", "BM_MlpGemms",
        6.0, true}});
}
