// Checks and helpers shared by the front-ends of tl::nn's image ops (conv, pooling, upsample);
// internal. The ops run the backend's image kernels or, where it has none, their composition
// (Note [Image kernels] in core/kernels.h).
#pragma once

#include <cstdint>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/tensor.h"

namespace tl::nn::detail {

// Every floating dtype (float16 and bfloat16 on the CPU through float, Note [Reduced-precision
// image kernels] in cpu/im2col.h).
inline void check_image_dtype(const char* op, const Tensor& input) {
  TL_CHECK(is_floating_point(input.dtype()), op,
           ": expected a floating-point input (float32, float64, float16 or bfloat16), got ",
           input.dtype());
}

// A floating tensor of 3 (unbatched [C, H, W]) or 4 ([N, C, H, W]) dims on a device with
// kernels.
inline void check_image_input(const char* op, const Tensor& input) {
  TL_CHECK(input.defined(), op, ": input must be defined");
  tl::detail::check_device(op, {&input});
  check_image_dtype(op, input);
  TL_CHECK(input.dim() == 3 || input.dim() == 4, op,
           ": expected a 3-D (unbatched [C, H, W]) or 4-D (batched [N, C, H, W]) input, got a ",
           input.dim(), "-D tensor of shape ", input.sizes());
}

// The compositions (nn/unfold.h) multiply through the backend's matmul, float32/float64.
inline void check_composable(const char* op, const Tensor& input) {
  TL_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op, ": ", input.dtype(),
           " is not implemented for tensors on ", input.device(), " (float32 and float64 are)");
}

// Backward formulas here are kernels, not differentiable tensor ops: with create_graph they
// would silently give a zero second derivative, so they refuse instead.
inline void check_no_double_backward(const char* op) {
  TL_CHECK(!autograd::is_grad_enabled(), op,
           ": double backward (create_graph=true) is not implemented for this op");
}

// The planes of a 4-D input as a Window2d: a 1 x 1 window, output sizes still to be filled in.
inline tl::detail::Window2d image_window(const Tensor& x) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), 1, 1, 1, 1, 0, 0, 1, 1, 0, 0};
}

// The backend's kernel for a one-input image op, with its autograd node; undefined where it
// has none (the caller composes the op). `forward()` runs the kernel under no_grad;
// `backward(grad_in, grad_out, saved)` fills the input's gradient, allocated here like the
// input (contiguous); `keep` (read once forward ran; undefined: nothing) is saved for it.
template <typename Forward, typename Backward>
Tensor run_image_op(const char* op, const char* node, const Tensor& input, const Tensor& keep,
                    Forward forward, Backward backward) {
  Tensor out;
  {
    const NoGradGuard no_grad;
    out = forward();
  }
  if (!out.defined()) return out;
  using autograd::variable_list;
  autograd::record(out, node, {&input}, keep.defined() ? variable_list{keep} : variable_list{},
                   [op, backward, in_sizes = input.sizes().vec()](const variable_list& g,
                                                                  const variable_list& saved) {
                     check_no_double_backward(op);
                     Tensor gi = empty(in_sizes, g[0].options());
                     if (gi.numel() > 0) backward(gi, g[0], saved);
                     return variable_list{gi};
                   });
  return out;
}

}  // namespace tl::nn::detail
