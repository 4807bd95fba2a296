// Pitfall 13: a multi-tensor (foreach) Adam step sets the peak with its temporaries.
//
// PyTorch's Adam and AdamW run `_multi_tensor_adam` by default on CUDA: each op goes over every
// parameter before the next, so `exp_avg_sq.sqrt() / sqrt(bc2) + eps` is live for all of them
// at once -- a parameter-sized temporary on top of the parameters, their gradients and both
// moments, just when all of those are live. Here a model of 16 MiB of weights trains at a
// small batch, so the step's 16 MiB of denominators make the peak a quarter higher than the
// forward and backward ever go. The fix, `fused=True` in PyTorch (one kernel per parameter,
// tensorlib's default), updates each parameter in one pass with no temporary.
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_optimizer_temporaries",
      "AdamW's multi-tensor (foreach) step over a 16 MiB model (fixed: the fused step)", 5);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    model->push_back(std::make_shared<tl::nn::Linear>(1024, 1024));
    model->push_back(std::make_shared<tl::nn::Tanh>());
  }
  pitfalls::place(*model, o);
  tl::optim::AdamOptions options;  // AdamW's defaults: lr 1e-3, weight decay 1e-2
  options.weight_decay = 1e-2;
  options.fused = o.fixed;     // the fix: one pass per parameter, no temporaries
  options.foreach = !o.fixed;  // BUG (for memory): every parameter's denominator at once
  tl::optim::AdamW optimizer(model->parameters(), options);

  pitfalls::Report report(o.device);
  report.take("before");
  tl::Tensor last_loss;
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor x = tl::randn({64, 1024}, o.device);
    tl::Tensor y = tl::randn({64, 1024}, o.device);
    optimizer.zero_grad();
    tl::Tensor loss = tl::nn::functional::mse_loss((*model)(x), y);
    loss.backward();
    optimizer.step();
    last_loss = loss.detach();
  }
  report.take("after");
  std::printf("loss after %d steps: %.6f (the same with --fixed)\n\n", o.steps,
              last_loss.item<double>());
  report.print();
  return 0;
}
