// Pitfall 14: a warm-up forward's graph kept alive under the whole training loop.
//
// A warm-up pass (to touch lazy state, to time a first call) runs the model with grad mode on
// and keeps its output. Nothing calls backward on it, and as long as the output is referenced
// every tensor its forward saved for backward stays allocated: here four 1024 x 1024 layers at
// batch 512 save the batch and each layer's linear and tanh outputs, 2 MiB apiece, 18 MiB that
// sit under every step of the loop that follows, on top of that step's own activations. The fix
// runs the warm-up under tl::NoGradGuard (torch.no_grad()): it saves nothing, and only its
// output (2 MiB) is kept.
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_warmup_graph",
      "a warm-up forward with grad mode on whose output is kept (fixed: under NoGradGuard)", 10);
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
  tl::Tensor warm;
  {
    const tl::Tensor x = tl::randn({512, 1024}, o.device);
    if (o.fixed) {
      tl::NoGradGuard no_grad;  // the warm-up saves nothing
      warm = (*model)(x);
    } else {
      warm = (*model)(x);  // BUG: grad mode on, and `warm` keeps its graph alive
    }
  }
  tl::Tensor last_loss;
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor x = tl::randn({512, 1024}, o.device);
    tl::Tensor y = tl::randn({512, 1024}, o.device);
    optimizer.zero_grad();
    tl::Tensor loss = tl::nn::functional::mse_loss((*model)(x), y);
    loss.backward();
    optimizer.step();
    last_loss = loss.detach();
  }
  report.take("after");
  std::printf("warm-up output %lld x %lld; loss after %d steps: %.6f (the same with --fixed)\n\n",
              static_cast<long long>(warm.size(0)), static_cast<long long>(warm.size(1)), o.steps,
              last_loss.item<double>());
  report.print();
  return 0;
}
