// Checks and helpers shared by the image ops of tl::nn (conv, pooling, upsample); internal.
#pragma once

#include <cstdint>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/error.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::nn::detail {

// Calls f.template operator()<T>() with T = float or double (the dtype was checked before).
template <typename F>
void dispatch_floating(ScalarType dt, F&& f) {
  if (dt == kFloat32) {
    f.template operator()<float>();
  } else {
    f.template operator()<double>();
  }
}

// Whether `input`'s backend runs the direct loops of the image ops, or they are composed
// (core/kernels.h).
inline bool direct_image_loops(const Tensor& input) {
  return tl::detail::kernels_for(input.device()).direct_image_loops();
}

// A CPU (or, with `cuda_ok`, CUDA) float32/float64 tensor of 3 (unbatched [C, H, W]) or 4
// ([N, C, H, W]) dims.
inline void check_image_input(const char* op, const Tensor& input, bool cuda_ok = false) {
  TL_CHECK(input.defined(), op, ": input must be defined");
  if (cuda_ok) {
    tl::detail::check_device(op, {&input});
  } else {
    cpu::check_cpu(op, {&input});
  }
  TL_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op,
           ": expected a float32 or float64 input, got ", input.dtype());
  TL_CHECK(input.dim() == 3 || input.dim() == 4, op,
           ": expected a 3-D (unbatched [C, H, W]) or 4-D (batched [N, C, H, W]) input, got a ",
           input.dim(), "-D tensor of shape ", input.sizes());
}

// Backward formulas here are kernels, not differentiable tensor ops: with create_graph they
// would silently give a zero second derivative, so they refuse instead.
inline void check_no_double_backward(const char* op) {
  TL_CHECK(!autograd::is_grad_enabled(), op,
           ": double backward (create_graph=true) is not implemented for this op");
}

// N * C independent [H, W] planes in, [out_h, out_w] planes out.
struct PlaneShape {
  int64_t planes, in_h, in_w, out_h, out_w;
};

// The planes of a 4-D input (output size still to be filled in).
inline PlaneShape plane_shape(const Tensor& x) {
  return {x.size(0) * x.size(1), x.size(2), x.size(3), 0, 0};
}

}  // namespace tl::nn::detail
