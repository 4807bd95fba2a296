// interpolate ("nearest", "bilinear"), device-neutral, and the Upsample module: the arguments
// and output sizes as PyTorch's, then the backend's kernel (cpu/upsample.cpp) or, where it has
// none, the separable composition of nn/unfold.h with the same indices and taps
// (core/image_windows.h, ATen's formulas of aten/src/ATen/native/UpSample.h).
#include "tensorlib/nn/upsample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorlib/core/image_windows.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace detail {

using tl::detail::AxisScale;

// The per-axis weights of composed upsampling (Note [Separable resampling] in nn/unfold.cpp),
// from the indices and taps the CPU kernels use (bilinear's in the input's type).
AxisWeights nearest_axis(int64_t in, int64_t out, std::optional<double> scale_factor) {
  AxisWeights m(out, in);
  const std::vector<int64_t> idx = tl::detail::nearest_indices(AxisScale{in, out, scale_factor});
  for (int64_t o = 0; o < out; ++o) m.at(o, idx[o]) = 1;
  return m;
}

AxisWeights linear_axis(int64_t in, int64_t out, std::optional<double> scale_factor,
                        bool align_corners, ScalarType dtype) {
  AxisWeights m(out, in);
  auto add = [&](const auto& t) {
    for (int64_t o = 0; o < out; ++o) {
      m.at(o, t.i0[o]) += t.lambda0[o];
      m.at(o, t.i0[o] + t.offset[o]) += t.lambda1[o];
    }
  };
  const AxisScale a{in, out, scale_factor};
  if (dtype == kFloat64) {
    add(tl::detail::linear_taps<double>(a, align_corners));
  } else {
    add(tl::detail::linear_taps<float>(a, align_corners));
  }
  return m;
}

}  // namespace detail

namespace functional {

Tensor interpolate(const Tensor& input, const InterpolateOptions& o) {
  constexpr const char* kOp = "interpolate";
  detail::check_image_input(kOp, input);
  TL_CHECK(input.dim() == 4, kOp, ": expected a 4-D input [N, C, H, W] for 2-D resizing, got a ",
           input.dim(), "-D tensor of shape ", input.sizes());
  const bool nearest = o.mode_ == "nearest", bilinear = o.mode_ == "bilinear";
  TL_CHECK(nearest || bilinear, kOp, ": mode must be \"nearest\" or \"bilinear\", got \"", o.mode_,
           "\"");
  TL_CHECK(o.size_.has_value() != o.scale_factor_.has_value(), kOp,
           o.size_ ? ": only one of size or scale_factor should be defined"
                   : ": either size or scale_factor should be defined");
  TL_CHECK(!(nearest && o.align_corners_.has_value()), kOp,
           ": align_corners can only be set with the interpolating mode \"bilinear\", not "
           "\"nearest\"");
  TL_CHECK(!(o.size_ && o.recompute_scale_factor_.value_or(false)), kOp,
           ": recompute_scale_factor is not meaningful with an explicit size");
  tl::detail::Window2d g = detail::image_window(input);
  std::optional<double> sh, sw;
  if (o.size_) {
    g.out_h = o.size_->h;
    g.out_w = o.size_->w;
  } else {
    TL_CHECK(o.scale_factor_->h > 0 && o.scale_factor_->w > 0, kOp,
             ": scale_factor must be positive, got ", *o.scale_factor_);
    g.out_h = static_cast<int64_t>(std::floor(double(g.height) * o.scale_factor_->h));
    g.out_w = static_cast<int64_t>(std::floor(double(g.width) * o.scale_factor_->w));
    if (!o.recompute_scale_factor_.value_or(false)) {
      sh = o.scale_factor_->h;
      sw = o.scale_factor_->w;
    }
  }
  TL_CHECK(g.height > 0 && g.width > 0 && g.out_h > 0 && g.out_w > 0, kOp, ": input (", g.height,
           " x ", g.width, ") and output (", g.out_h, " x ", g.out_w,
           ") sizes should be greater than 0; input shape ", input.sizes());
  const bool align = o.align_corners_.value_or(false);
  const tl::detail::Resize2d r{bilinear, align, sh, sw};
  const tl::detail::Kernels& kernels = tl::detail::kernels_for(input.device());
  Tensor out = detail::run_image_op(
      nearest ? "interpolate (nearest)" : "interpolate (bilinear)",
      nearest ? "UpsampleNearest2D" : "UpsampleBilinear2D", input, Tensor(),
      [&] { return kernels.upsample2d(input, g, r); },
      [g, r](const Tensor& gi, const Tensor& go, const autograd::variable_list&) {
        tl::detail::kernels_for(gi.device()).upsample2d_backward(gi, go, g, r);
      });
  if (out.defined()) return out;
  detail::check_composable(kOp, input);
  if (nearest)
    return detail::resample2d(input, detail::nearest_axis(g.height, g.out_h, sh),
                              detail::nearest_axis(g.width, g.out_w, sw));
  return detail::resample2d(input, detail::linear_axis(g.height, g.out_h, sh, align, input.dtype()),
                            detail::linear_axis(g.width, g.out_w, sw, align, input.dtype()));
}

Tensor interpolate(const Tensor& input, std::optional<IntPair> size,
                   std::optional<DoublePair> scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor) {
  InterpolateOptions o;
  o.size_ = size;
  o.scale_factor_ = scale_factor;
  o.mode_ = mode;
  o.align_corners_ = align_corners;
  o.recompute_scale_factor_ = recompute_scale_factor;
  return interpolate(input, o);
}

}  // namespace functional

Upsample::Upsample(const UpsampleOptions& o) : Module("upsample"), options(o) {
  TL_CHECK(o.size_.has_value() != o.scale_factor_.has_value(),
           "Upsample: exactly one of size and scale_factor must be given");
  TL_CHECK(o.mode_ == "nearest" || o.mode_ == "bilinear",
           "Upsample: mode must be \"nearest\" or \"bilinear\", got \"", o.mode_, "\"");
}

Tensor Upsample::forward(const Tensor& x) {
  return functional::interpolate(x, options);
}

}  // namespace tl::nn
