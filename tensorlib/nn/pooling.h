// 2-D pooling (NCHW or unbatched CHW; float32, float64, and on the CPU float16 and bfloat16)
// as torch.nn.functional and torch.nn: same arguments, defaults, output sizes (ceil_mode
// included), tie-breaking and gradients.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"
#include "tensorlib/nn/pair.h"

namespace tl::nn::functional {

/// Max over each kernel window (padding counts as -inf). `stride` defaults to kernel_size.
/// Output size per dim: floor or, with ceil_mode, ceil of
/// (in + 2 padding - dilation (kernel - 1) - 1) / stride + 1, where a last window that would
/// start in the right padding is dropped.
Tensor max_pool2d(const Tensor& input, IntPair kernel_size,
                  std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                  IntPair dilation = 1, bool ceil_mode = false);

/// max_pool2d and, for every output, the position of its maximum within the input plane
/// (h * W + w, int64), as torch's return_indices=True. The first maximum in scan order wins;
/// a NaN counts as a maximum.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntPair kernel_size,
                                                   std::optional<IntPair> stride = std::nullopt,
                                                   IntPair padding = 0, IntPair dilation = 1,
                                                   bool ceil_mode = false);

/// Mean over each kernel window. The divisor is divisor_override when given, else the window's
/// size including padding (count_include_pad) or only the input elements it covers.
Tensor avg_pool2d(const Tensor& input, IntPair kernel_size,
                  std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

/// Mean over output_size windows spread evenly over the input: output i covers input
/// [floor(i * in / out), ceil((i + 1) * in / out)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntPair output_size);

}  // namespace tl::nn::functional

namespace tl::nn {

/// torch.nn.MaxPool2d (no parameters).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                     IntPair padding = 0, IntPair dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;

  IntPair kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

/// torch.nn.AvgPool2d (no parameters).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                     IntPair padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;

  IntPair kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};

/// torch.nn.AdaptiveAvgPool2d (no parameters).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntPair output_size);
  Tensor forward(const Tensor& x) override;

  IntPair output_size;
};

}  // namespace tl::nn
