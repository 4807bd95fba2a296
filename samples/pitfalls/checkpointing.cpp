// Pitfall 8: a deep network keeps every layer's activations for backward; checkpointing
// keeps a few and recomputes the rest.
//
// Training stores what each layer's backward needs, so activation memory grows with depth
// and peaks at the end of the forward pass. Activation checkpointing
// (torch.utils.checkpoint, tl::checkpoint) runs segments of the network without saving their
// insides and recomputes them during backward: the peak drops to the segment boundaries plus
// one segment's activations, for roughly one extra forward pass of compute. The "leaky"
// variant is the plain training step; --fixed checkpoints every four layers.
#include <tensorlib/autograd/checkpoint.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_checkpointing",
      "a 16-layer MLP storing all activations (fixed: tl::checkpoint every 4 layers)", 2);
  tl::manual_seed(0);
  const int depth = 16, width = 256, per_segment = 4;
  std::vector<std::shared_ptr<tl::nn::Sequential>> segments;
  auto model = std::make_shared<tl::nn::Sequential>();
  for (int s = 0; s < depth / per_segment; ++s) {
    auto seg = std::make_shared<tl::nn::Sequential>();
    for (int i = 0; i < per_segment; ++i) {
      seg->push_back(std::make_shared<tl::nn::Linear>(width, width));
      seg->push_back(std::make_shared<tl::nn::Tanh>());
    }
    model->push_back(seg);
    segments.push_back(seg);
  }
  auto head = std::make_shared<tl::nn::Linear>(width, 10);
  model->push_back(head);
  pitfalls::place(*model, o);
  tl::optim::SGD opt(model->parameters(), {.lr = 0.01});

  pitfalls::Report report(o.device);
  report.take("before");
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor x = tl::randn({1024, width}, o.device);
    tl::Tensor y = tl::randint(0, 10, {1024}, o.device);
    opt.zero_grad();
    tl::Tensor h = x;
    for (auto& seg : segments) {
      if (o.fixed)
        h = tl::checkpoint([seg](const tl::Tensor& in) { return (*seg)(in); }, h);
      else
        h = (*seg)(h);
    }
    tl::Tensor loss = tl::nn::functional::cross_entropy((*head)(h), y);
    loss.backward();
    opt.step();
  }
  report.take("after");
  report.print();
  return 0;
}
