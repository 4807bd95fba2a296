// 2-D convolution and transposed convolution (NCHW; float32, float64, and on the CPU float16
// and bfloat16), as torch.nn.functional and torch.nn: same argument order, defaults, output
// shapes, initialisation and gradients.
// A 3-D input [C, H, W] is an unbatched image, as in PyTorch.
#pragma once

#include <cstdint>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"
#include "tensorlib/nn/pair.h"

namespace tl::nn::functional {

/// Cross-correlation of `input` [N, C_in, H, W] with `weight` [C_out, C_in / groups, kH, kW],
/// plus `bias` [C_out] when defined. Output [N, C_out, H_out, W_out] with
/// H_out = (H + 2 padding - dilation (kH - 1) - 1) / stride + 1.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntPair stride = 1, IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1);

/// The adjoint of conv2d with respect to its input ("deconvolution"): `weight` is
/// [C_in, C_out / groups, kH, kW], output [N, C_out, H_out, W_out] with
/// H_out = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        IntPair stride = 1, IntPair padding = 0, IntPair output_padding = 0,
                        int64_t groups = 1, IntPair dilation = 1);

}  // namespace tl::nn::functional

namespace tl::nn {

/// Conv2d's arguments, chained as libtorch's: Conv2dOptions(1, 32, 3).padding(1).
struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, IntPair kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions& stride(IntPair v) { return stride_ = v, *this; }
  Conv2dOptions& padding(IntPair v) { return padding_ = v, *this; }
  Conv2dOptions& dilation(IntPair v) { return dilation_ = v, *this; }
  Conv2dOptions& groups(int64_t v) { return groups_ = v, *this; }
  Conv2dOptions& bias(bool v) { return bias_ = v, *this; }

  int64_t in_channels_, out_channels_;
  IntPair kernel_size_;
  IntPair stride_ = 1, padding_ = 0, dilation_ = 1;
  int64_t groups_ = 1;
  bool bias_ = true;
};

/// torch.nn.Conv2d. weight [out, in / groups, kH, kW] and bias [out] start uniform in
/// ±1/sqrt(fan_in), fan_in = in / groups * kH * kW (kaiming_uniform with a = sqrt(5)).
class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  Conv2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride = 1,
         IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;

  Conv2dOptions options;
  // Bound to the registered parameters, so Module::to() updates them (Note [Parameter
  // handles] in module.h); bias is undefined without one.
  Tensor& weight;
  Tensor& bias;
};

/// ConvTranspose2d's arguments: ConvTranspose2dOptions(64, 32, 4).stride(2).padding(1).
struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, IntPair kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  ConvTranspose2dOptions& stride(IntPair v) { return stride_ = v, *this; }
  ConvTranspose2dOptions& padding(IntPair v) { return padding_ = v, *this; }
  ConvTranspose2dOptions& output_padding(IntPair v) { return output_padding_ = v, *this; }
  ConvTranspose2dOptions& groups(int64_t v) { return groups_ = v, *this; }
  ConvTranspose2dOptions& bias(bool v) { return bias_ = v, *this; }
  ConvTranspose2dOptions& dilation(IntPair v) { return dilation_ = v, *this; }

  int64_t in_channels_, out_channels_;
  IntPair kernel_size_;
  IntPair stride_ = 1, padding_ = 0, output_padding_ = 0;
  int64_t groups_ = 1;
  bool bias_ = true;
  IntPair dilation_ = 1;
};

/// torch.nn.ConvTranspose2d. weight [in, out / groups, kH, kW] and bias [out] start uniform in
/// ±1/sqrt(fan_in) where, as PyTorch computes it from the weight's dim 1,
/// fan_in = out / groups * kH * kW.
class ConvTranspose2d : public Module {
 public:
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options);
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size,
                  IntPair stride = 1, IntPair padding = 0, IntPair output_padding = 0,
                  int64_t groups = 1, bool bias = true, IntPair dilation = 1);
  Tensor forward(const Tensor& x) override;

  ConvTranspose2dOptions options;
  Tensor& weight;  // bound to the registered parameters, as Conv2d's
  Tensor& bias;
};

}  // namespace tl::nn
