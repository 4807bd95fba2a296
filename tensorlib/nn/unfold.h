// The differentiable building blocks of the composed image ops (internal to tensorlib/nn): what
// runs on a backend without image kernels (Note [Image kernels] in core/kernels.h; CUDA today,
// while the CPU has its own): unfold (im2col) and fold (col2im) behind convolution, transposed
// convolution and max pooling, and the separable resampling behind average pooling and
// upsampling (Note [Separable resampling]).
#pragma once

#include <optional>
#include <vector>

#include "tensorlib/core/image_windows.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/tensor.h"

namespace tl::nn::detail {

/// [N, C, H, W] -> [N, C*kh*kw, out_h*out_w]: each column the window at one output position
/// (torch.nn.functional.unfold), pixels in the padding read as `pad`. The gradient is fold
/// (col2im). float32/float64 (on the CPU, which runs it in tests only, `pad` must be 0).
Tensor unfold2d(const Tensor& input, const tl::detail::Window2d& w, double pad);

/// The adjoint of unfold2d with zero padding: [N, C*kh*kw, out_h*out_w] columns -> [N, C, H, W]
/// images, every column entry added to the pixel it would have been read from
/// (torch.nn.functional.fold). The gradient is unfold. float32/float64; on the CPU (tests
/// only) zero padding only, for unfold2d too.
Tensor fold2d(const Tensor& cols, const tl::detail::Window2d& w);

/// One axis of a separable resampling: out = a row-major [out, in] matrix of weights.
struct AxisWeights {
  int64_t out, in;
  std::vector<double> w;
  AxisWeights(int64_t out_, int64_t in_) : out(out_), in(in_), w(static_cast<size_t>(out_ * in_)) {}
  double& at(int64_t o, int64_t i) { return w[static_cast<size_t>(o * in + i)]; }
};

/// [N, C, H, W] -> [N, C, rows.out, cols.out]: each plane P becomes rows @ P @ cols^T (two
/// matrix products, cuBLAS on CUDA; autograd differentiates them). float32/float64.
Tensor resample2d(const Tensor& input, const AxisWeights& rows, const AxisWeights& cols);

/// conv2d and conv_transpose2d as the CUDA backend composes them: unfold + one batched
/// product per group + bias, and products + fold + bias. `win` is conv2d's input geometry,
/// conv_transpose2d's output geometry (windows at the input's positions). The CUDA path of
/// nn/conv.cpp; on the CPU (im2col/col2im kernels of cpu/im2col.h) the tests check the
/// composition against the fused CPU kernels.
/// Both work in chunks of images whose columns fit `col_budget_bytes`, and both recompute a
/// chunk's columns in backward (Note [Chunked convolution columns]).
Tensor conv2d_unfolded(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const tl::detail::Window2d& win, int64_t groups,
                       int64_t col_budget_bytes = tl::detail::kColBudgetBytes);
Tensor conv_transpose2d_folded(const Tensor& input, const Tensor& weight, const Tensor& bias,
                               const tl::detail::Window2d& win, int64_t groups,
                               int64_t col_budget_bytes = tl::detail::kColBudgetBytes);

/// The per-axis weights of the separable ops (Note [Separable resampling]), built with the CPU
/// kernels' own window and tap formulas. avg_pool: 1 / the axis's divisor factor over each
/// clipped window; with a divisor override 1, or 1 / override on the axis that `carries` it.
AxisWeights avg_pool_axis(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                          bool count_include_pad, std::optional<int64_t> divisor_override,
                          bool carries_override);
AxisWeights adaptive_pool_axis(int64_t out, int64_t in);
AxisWeights nearest_axis(int64_t in, int64_t out, std::optional<double> scale_factor);
/// Bilinear taps computed in `dtype` (float32 or float64), as the CPU kernel.
AxisWeights linear_axis(int64_t in, int64_t out, std::optional<double> scale_factor,
                        bool align_corners, ScalarType dtype);

}  // namespace tl::nn::detail
