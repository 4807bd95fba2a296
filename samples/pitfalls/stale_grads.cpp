// Pitfall 12: the last step's gradients live through the next forward.
//
// `optimizer.zero_grad()` placed after the forward (or `zero_grad(set_to_none=False)`, which
// zeroes the gradients in place and never frees them) keeps one gradient per parameter alive
// while the next forward saves its activations: the forward's peak holds parameters,
// gradients and activations at once, where the gradients are not needed until backward makes
// them again. Here four 1024 x 1024 layers hold 16 MiB of weights and, at batch 512, save about
// as much for backward, so the stale 16 MiB of gradients is a third of the peak. The fix calls
// zero_grad() (set_to_none, the default) before the forward: the gradients are freed, and
// backward makes each one as it frees the activations its layer saved.
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_stale_grads",
      "a training loop that zeroes the gradients after the forward (fixed: before it)", 10);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    model->push_back(std::make_shared<tl::nn::Linear>(1024, 1024));
    model->push_back(std::make_shared<tl::nn::Tanh>());
  }
  pitfalls::place(*model, o);
  tl::optim::SGD optimizer(model->parameters(), {/*lr=*/1e-3});

  pitfalls::Report report(o.device);
  report.take("before");
  tl::Tensor last_loss;
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor x = tl::randn({512, 1024}, o.device);
    tl::Tensor y = tl::randn({512, 1024}, o.device);
    if (o.fixed) optimizer.zero_grad();  // the gradients are freed before the forward
    tl::Tensor loss = tl::nn::functional::mse_loss((*model)(x), y);
    if (!o.fixed)
      optimizer.zero_grad();  // BUG: the last step's gradients lived through the forward
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
