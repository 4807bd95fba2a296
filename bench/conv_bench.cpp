// The Fashion-MNIST CNN at batch 64 (Conv2d(1,32,3,p1) -> ReLU -> MaxPool2d(2) ->
// Conv2d(32,64,3,p1) -> ReLU -> MaxPool2d(2) -> Flatten -> Linear(3136,128) -> ReLU ->
// Linear(128,10)): its conv layers forward and forward+backward, and one training step.
// The ratio targets compare each conv layer with the bare OpenBLAS products it is made of
// (the im2col convolution can at best cost its GEMMs); PyTorch's times for the same shapes
// come from tests/tensorlib/data/cnn_step_torch.py.
#include <cblas.h>

#include <vector>

#include <tensorlib/nn/conv.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/pooling.h>
#include <tensorlib/tensorlib.h>

#include "bench_ratio.h"

namespace {

namespace nn = tl::nn;
namespace F = tl::nn::functional;
constexpr int64_t kBatch = 64;

// conv2 of the CNN: [64, 32, 14, 14] * [64, 32, 3, 3], padding 1.
void BM_Conv2Forward(benchmark::State& state) {
  tl::manual_seed(0);
  tl::Tensor x = tl::randn({kBatch, 32, 14, 14}), w = tl::randn({64, 32, 3, 3});
  tl::Tensor b = tl::randn({64});
  for (auto _ : state) {
    tl::Tensor y = F::conv2d(x, w, b, 1, 1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
}
BENCHMARK(BM_Conv2Forward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

// The product conv2's forward reduces to: [64, 288] @ [288, 64 * 196].
void BM_Conv2ForwardGemm(benchmark::State& state) {
  const int m = 64, k = 288, n = kBatch * 196;
  std::vector<float> a(m * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_Conv2ForwardGemm)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

template <bool kInputGrad>
void conv_forward_backward(benchmark::State& state, int64_t cin, int64_t cout, int64_t hw) {
  tl::manual_seed(0);
  tl::Tensor x = tl::randn({kBatch, cin, hw, hw}).requires_grad_(kInputGrad);
  tl::Tensor w = tl::randn({cout, cin, 3, 3}).requires_grad_();
  tl::Tensor b = tl::randn({cout}).requires_grad_();
  for (auto _ : state) {
    F::conv2d(x, w, b, 1, 1).sum().backward();
    w.mutable_grad() = tl::Tensor();
    b.mutable_grad() = tl::Tensor();
    if (kInputGrad) x.mutable_grad() = tl::Tensor();
  }
}

// conv1 (its input is the data: no input gradient) and conv2, forward + backward.
void BM_Conv1ForwardBackward(benchmark::State& state) {
  conv_forward_backward<false>(state, 1, 32, 28);
}
BENCHMARK(BM_Conv1ForwardBackward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

void BM_Conv2ForwardBackward(benchmark::State& state) {
  conv_forward_backward<true>(state, 32, 64, 14);
}
BENCHMARK(BM_Conv2ForwardBackward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

// The three products of conv2's forward + backward (out, grad_weight, grad_col).
void BM_Conv2ForwardBackwardGemms(benchmark::State& state) {
  const int m = 64, k = 288, n = kBatch * 196;
  std::vector<float> w(m * k, 0.5f), col(size_t(k) * n, 0.25f), out(size_t(m) * n, 0.1f);
  std::vector<float> gw(m * k), gcol(size_t(k) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, w.data(), k, col.data(),
                n, 0.0f, out.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1.0f, out.data(), n, col.data(),
                n, 0.0f, gw.data(), k);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, w.data(), k, out.data(), n,
                0.0f, gcol.data(), n);
    benchmark::DoNotOptimize(gcol.data());
  }
}
BENCHMARK(BM_Conv2ForwardBackwardGemms)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

// One SGD step of the whole CNN on a fixed batch.
void BM_CnnTrainStep(benchmark::State& state) {
  tl::manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 32, 3).padding(1)));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::MaxPool2d>(2));
  model->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(32, 64, 3).padding(1)));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::MaxPool2d>(2));
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(3136, 128));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(128, 10));
  tl::Tensor x = tl::randn({kBatch, 1, 28, 28});
  tl::Tensor y = tl::randint(0, 10, {kBatch});
  for (auto _ : state) {
    model->zero_grad();
    F::cross_entropy((*model)(x), y).backward();
    tl::NoGradGuard no_grad;
    for (tl::Tensor& p : model->parameters()) p.sub_(p.grad() * 0.01);
  }
}
BENCHMARK(BM_CnnTrainStep)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  return tidemark::bench::run_with_targets(
      argc, argv,
      {
          {"conv2d forward / its GEMM", "BM_Conv2Forward", "BM_Conv2ForwardGemm", 1.6, true},
          {"conv2d forward+backward / its three GEMMs", "BM_Conv2ForwardBackward",
           "BM_Conv2ForwardBackwardGemms", 1.6, true},
      });
}
