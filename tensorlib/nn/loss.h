// Loss functions with PyTorch's definitions and defaults (mean reduction).
#pragma once

#include <optional>
#include <utility>

#include "tensorlib/core/tensor.h"

namespace tl::nn::functional {

// Mean of (input - target)^2.
Tensor mse_loss(const Tensor& input, const Tensor& target);
// Cross entropy of logits [N, C] against class indices [N] (int64). Targets equal to
// ignore_index contribute nothing and are left out of the mean; with label_smoothing e the
// target distribution is (1 - e) one-hot + e / C, as torch.nn.functional.cross_entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
// Negative log likelihood of log-probabilities [N, C] at class indices [N].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100);
// Mean over elements of -w [pw t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))], computed as
// (1 - t) x + (1 + (pw - 1) t) softplus(-x), so any finite logit gives a finite loss.
// `target` has input's shape (probabilities in [0, 1]); `weight` broadcasts against input,
// `pos_weight` against its last dimension (the classes); either may be undefined. One
// autograd node with the closed-form gradients for input, target, weight and pos_weight.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {});

}  // namespace tl::nn::functional

namespace tl::nn {

// Loss objects for a libtorch user (torch::nn::MSELoss and friends): call with (input, target).
class MSELoss {
 public:
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return functional::mse_loss(input, target);
  }
};

class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, double label_smoothing = 0.0)
      : ignore_index(ignore_index), label_smoothing(label_smoothing) {}
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return functional::cross_entropy(logits, target, ignore_index, label_smoothing);
  }
  int64_t ignore_index;
  double label_smoothing;
};

class NLLLoss {
 public:
  explicit NLLLoss(int64_t ignore_index = -100) : ignore_index(ignore_index) {}
  Tensor operator()(const Tensor& log_probs, const Tensor& target) const {
    return functional::nll_loss(log_probs, target, ignore_index);
  }
  int64_t ignore_index;
};

class BCEWithLogitsLoss {
 public:
  explicit BCEWithLogitsLoss(Tensor weight = {}, Tensor pos_weight = {})
      : weight(std::move(weight)), pos_weight(std::move(pos_weight)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return functional::binary_cross_entropy_with_logits(input, target, weight, pos_weight);
  }
  Tensor weight, pos_weight;
};

}  // namespace tl::nn
