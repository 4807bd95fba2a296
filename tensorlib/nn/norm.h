// Normalisation layers with PyTorch's semantics and defaults: batch_norm / BatchNorm1d /
// BatchNorm2d and layer_norm / LayerNorm.
//
// Note [Fused normalisation backward]
// Each op records one autograd node whose backward is the closed-form gradient, saving only
// the input, the weight and the per-group mean and 1/std. Composing the op from elementwise
// ops would save several input-sized intermediates (x - mean, x_hat, ...) for backward; this
// way a BatchNorm layer holds one activation (its input) between forward and backward, as
// PyTorch's native_batch_norm.
#pragma once

#include <optional>
#include <vector>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"

namespace tl::nn::functional {

// Normalises each channel (dim 1) of an [N, C], [N, C, L] or [N, C, H, W] input. In training,
// uses the batch's mean and biased variance and, when the running statistics are given,
// updates them in place with `momentum` (the running variance with the unbiased variance);
// in evaluation, uses the running statistics. `weight` and `bias` ([C]) may be undefined.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

// Normalises over the trailing dimensions `normalized_shape` (biased variance); `weight` and
// `bias` (shape normalized_shape) may be undefined.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace tl::nn::functional

namespace tl::nn {

// torch.nn.BatchNorm*d: weight (ones) and bias (zeros) when affine; buffers running_mean
// (zeros), running_var (ones) and num_batches_tracked (int64) when track_running_stats.
// momentum = nullopt uses the cumulative average (1 / num_batches_tracked), as PyTorch's None.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;
  Tensor& running_var;
  Tensor& num_batches_tracked;

 protected:
  BatchNorm(const char* kind, int64_t num_features, double eps, std::optional<double> momentum,
            bool affine, bool track_running_stats);
  virtual void check_input_dim(const Tensor& x) const = 0;
};

// Over [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("batchnorm1d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// Over [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("batchnorm2d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// torch.nn.LayerNorm: weight ones and bias zeros of shape normalized_shape.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) override;

  std::vector<int64_t> normalized_shape;
  double eps;
  Tensor& weight;
  Tensor& bias;
};

}  // namespace tl::nn
