// Pitfall 4: evaluation without NoGradGuard builds graphs and saves activations.
//
// With grad mode on, every layer records a graph node and keeps the tensors its backward
// would need, so a forward pass holds all of its activations until the output dies. In
// evaluation nothing calls backward: each activation could have been freed as soon as the
// next layer had used it. The fix: tl::NoGradGuard (torch.no_grad()) or tl::InferenceMode
// around the evaluation loop (and model->eval() for dropout and batch norm).
#include <tensorlib/nn/module.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o =
      pitfalls::parse(argc, argv, "pitfall_eval_without_no_grad",
                      "an evaluation loop with grad mode on (fixed: under tl::NoGradGuard)", 4);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  model->push_back(std::make_shared<tl::nn::Linear>(256, 512));
  for (int i = 0; i < 5; ++i) {
    model->push_back(std::make_shared<tl::nn::ReLU>());
    model->push_back(std::make_shared<tl::nn::Linear>(512, 512));
  }
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(512, 10));
  model->eval();
  pitfalls::place(*model, o);

  pitfalls::Report report(o.device);
  report.take("before");
  int64_t correct = 0, seen = 0;
  {
    std::optional<tl::NoGradGuard> no_grad;
    if (o.fixed) no_grad.emplace();  // the fix
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor x = tl::randn({2048, 256}, o.device);
      tl::Tensor y = tl::randint(0, 10, {2048}, o.device);
      tl::Tensor logits = (*model)(x);
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += x.size(0);
    }
  }
  report.take("after");
  std::printf("accuracy of an untrained model: %.1f%% of %lld\n\n", 100.0 * correct / seen,
              static_cast<long long>(seen));
  report.print();
  return 0;
}
