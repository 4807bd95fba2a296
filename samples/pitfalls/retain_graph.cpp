// Pitfall 3: backward(retain_graph=true) keeps the graph, and its activations, alive.
//
// After an ordinary backward the graph frees the tensors it saved. With retain_graph=true
// (often added to silence "trying to backward through the graph a second time") they stay
// alive for as long as anything references the graph -- here the `loss` variable, which, as
// in a Python training loop, lives until the next step assigns it. So the previous step's
// activations are still allocated while the next forward builds its own, and the peak holds
// two steps of activations instead of one. The fix: a plain backward().
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_retain_graph",
      "loss.backward(retain_graph=true) in the training loop (fixed: loss.backward())", 6);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  model->push_back(std::make_shared<tl::nn::Linear>(256, 512));
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(512, 512));
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(512, 10));
  pitfalls::place(*model, o);
  tl::optim::SGD opt(model->parameters(), {.lr = 0.01});

  pitfalls::Report report(o.device);
  report.take("before");
  {
    tl::Tensor loss;  // lives across iterations, like a Python loop variable
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor x = tl::randn({2048, 256}, o.device);
      tl::Tensor y = tl::randint(0, 10, {2048}, o.device);
      opt.zero_grad();
      loss = tl::nn::functional::cross_entropy((*model)(x), y);
      loss.backward({}, /*retain_graph=*/!o.fixed);  // BUG unfixed: the graph outlives the step
      opt.step();
    }
    report.take("after");
  }
  report.take("end");
  report.print();
  return 0;
}
