// Pitfall 1: summing loss tensors keeps every step's graph alive.
//
// Averaging a loss over many batches with `total = total + loss` makes `total` the root of
// one autograd graph that reaches every batch's graph, and each graph keeps the activations
// it saved for a backward that never comes. Memory grows by one batch of activations per
// step until `total` dies. The fix: accumulate a value without history -- `loss.detach()`
// (stays on the device, no sync) or `loss.item()` -- or run the loop under NoGradGuard.
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_accumulated_loss",
      "mean loss over batches: total = total + loss (fixed: total + loss.detach())", 20);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  model->push_back(std::make_shared<tl::nn::Linear>(256, 1024));
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(1024, 1024));
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(1024, 10));
  pitfalls::place(*model, o);

  pitfalls::Report report(o.device);
  report.take("before");
  {
    tl::Tensor total = tl::zeros({}, o.device);
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor x = tl::randn({256, 256}, o.device);
      tl::Tensor y = tl::randint(0, 10, {256}, o.device);
      tl::Tensor loss = tl::nn::functional::cross_entropy((*model)(x), y);
      if (o.fixed)
        total = total + loss.detach();  // a number, no graph
      else
        total = total + loss;  // BUG: total's graph holds every batch's activations
    }
    report.take("after");
    report.add("retained_bytes", report.allocated("after") - report.allocated("before"));
    std::printf("mean loss %.4f over %d batches\n", total.item<double>() / o.steps, o.steps);
  }
  report.take("end");
  report.print();
  return 0;
}
