// Loss functions with PyTorch's definitions and defaults (mean reduction).
#pragma once

#include <optional>

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

}  // namespace tl::nn::functional
