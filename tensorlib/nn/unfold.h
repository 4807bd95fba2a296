// unfold (im2col) as a differentiable op on CUDA tensors: the building block of CUDA
// convolution and max pooling (internal to tensorlib/nn; the CPU keeps its fused kernels,
// Note [Convolution as one GEMM per group]).
#pragma once

#include "tensorlib/core/cuda_kernels.h"
#include "tensorlib/core/tensor.h"

namespace tl::nn::detail {

/// [N, C, H, W] -> [N, C*kh*kw, out_h*out_w]: each column the window at one output position
/// (torch.nn.functional.unfold), pixels in the padding read as `pad`. The gradient is fold
/// (col2im). CUDA float32/float64 tensors only.
Tensor unfold2d(const Tensor& input, const tl::detail::Window2d& w, double pad);

}  // namespace tl::nn::detail
