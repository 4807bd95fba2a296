// interpolate ("nearest", "bilinear") on the CPU with its gradient, and the Upsample module.
// Source indices and weights are computed once per output row and column, with ATen's
// formulas and float types (aten/src/ATen/native/UpSample.h): nearest's scale is a float for
// every dtype, bilinear's is the input's type.
#include "tensorlib/nn/upsample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/nn/im2col.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace {

using autograd::variable_list;
using detail::PlaneShape;

// What one output size and its optional scale factor mean for the kernels.
struct AxisScale {
  int64_t in, out;
  std::optional<double> scale_factor;  // passed on unless recomputed (ATen's `scales`)
};

// ATen's nearest_idx.
std::vector<int64_t> nearest_indices(const AxisScale& a) {
  std::vector<int64_t> idx(a.out);
  const float scale = a.scale_factor && *a.scale_factor > 0
                          ? static_cast<float>(1.0 / *a.scale_factor)
                          : static_cast<float>(a.in) / static_cast<float>(a.out);
  for (int64_t i = 0; i < a.out; ++i) {
    if (a.out == a.in) {
      idx[i] = i;
    } else if (a.out == 2 * a.in) {
      idx[i] = i >> 1;
    } else {
      idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * scale)), a.in - 1);
    }
  }
  return idx;
}

// Bilinear taps along one axis: output i = (1 - lambda) * in[i0] + lambda * in[i0 + offset].
template <typename T>
struct LinearTaps {
  std::vector<int64_t> i0, offset;
  std::vector<T> lambda0, lambda1;
};

// ATen's area_pixel_compute_scale / area_pixel_compute_source_index /
// compute_source_index_and_lambda.
template <typename T>
LinearTaps<T> linear_taps(const AxisScale& a, bool align_corners) {
  LinearTaps<T> t{std::vector<int64_t>(a.out), std::vector<int64_t>(a.out), std::vector<T>(a.out),
                  std::vector<T>(a.out)};
  T scale;
  if (align_corners) {
    scale = a.out > 1 ? static_cast<T>(a.in - 1) / static_cast<T>(a.out - 1) : T(0);
  } else {
    scale = a.scale_factor && *a.scale_factor > 0 ? static_cast<T>(1.0 / *a.scale_factor)
                                                  : static_cast<T>(a.in) / static_cast<T>(a.out);
  }
  for (int64_t i = 0; i < a.out; ++i) {
    if (a.out == a.in) {
      t.i0[i] = i;
      t.offset[i] = 0;
      t.lambda0[i] = 1;
      t.lambda1[i] = 0;
      continue;
    }
    T src =
        align_corners ? scale * static_cast<T>(i) : scale * (static_cast<T>(i) + T(0.5)) - T(0.5);
    if (!align_corners && src < T(0)) src = T(0);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), a.in - 1);
    const T lambda1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
    t.i0[i] = i0;
    t.offset[i] = i0 < a.in - 1 ? 1 : 0;
    t.lambda1[i] = lambda1;
    t.lambda0[i] = T(1) - lambda1;
  }
  return t;
}

template <typename T>
void nearest_forward(const T* in, T* out, const PlaneShape& p, const std::vector<int64_t>& ih,
                     const std::vector<int64_t>& iw) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * out_plane, [&](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const T* row = src + ih[oh] * p.in_w;
      for (int64_t ow = 0; ow < p.out_w; ++ow) dst[oh * p.out_w + ow] = row[iw[ow]];
    }
  });
}

template <typename T>
void nearest_backward(const T* grad_out, T* grad_in, const PlaneShape& p,
                      const std::vector<int64_t>& ih, const std::vector<int64_t>& iw) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      T* row = gi + ih[oh] * p.in_w;
      for (int64_t ow = 0; ow < p.out_w; ++ow) row[iw[ow]] += go[oh * p.out_w + ow];
    }
  });
}

template <typename T>
void bilinear_forward(const T* in, T* out, const PlaneShape& p, const LinearTaps<T>& th,
                      const LinearTaps<T>& tw) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * out_plane * 4, [&](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const T* r0 = src + th.i0[oh] * p.in_w;
      const T* r1 = r0 + th.offset[oh] * p.in_w;
      const T h0 = th.lambda0[oh], h1 = th.lambda1[oh];
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t c0 = tw.i0[ow], c1 = c0 + tw.offset[ow];
        const T w0 = tw.lambda0[ow], w1 = tw.lambda1[ow];
        dst[oh * p.out_w + ow] =
            h0 * (w0 * r0[c0] + w1 * r0[c1]) + h1 * (w0 * r1[c0] + w1 * r1[c1]);
      }
    }
  });
}

template <typename T>
void bilinear_backward(const T* grad_out, T* grad_in, const PlaneShape& p, const LinearTaps<T>& th,
                       const LinearTaps<T>& tw) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * (in_plane + 4 * out_plane), [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      T* r0 = gi + th.i0[oh] * p.in_w;
      T* r1 = r0 + th.offset[oh] * p.in_w;
      const T h0 = th.lambda0[oh], h1 = th.lambda1[oh];
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t c0 = tw.i0[ow], c1 = c0 + tw.offset[ow];
        const T w0 = tw.lambda0[ow], w1 = tw.lambda1[ow];
        const T g = go[oh * p.out_w + ow];
        r0[c0] += h0 * w0 * g;
        r0[c1] += h0 * w1 * g;
        r1[c0] += h1 * w0 * g;
        r1[c1] += h1 * w1 * g;
      }
    }
  });
}

// Runs the chosen kernel pair: forward(in, out) now, backward(grad_out, grad_in) in backward.
template <typename Fwd, typename Bwd>
Tensor resize(const Tensor& input, const PlaneShape& p, const char* node, const char* op,
              Fwd forward, Bwd backward) {
  const Tensor x = input.contiguous();
  Tensor out = empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.dtype());
  if (out.numel() > 0) forward(x, out);
  autograd::record(
      out, node, {&input}, {},
      [backward, op, in_sizes = input.sizes().vec()](const variable_list& g, const variable_list&) {
        detail::check_no_double_backward(op);
        const Tensor go = g[0].contiguous();
        Tensor gi = empty(in_sizes, go.dtype());
        if (gi.numel() > 0) backward(go, gi);
        return variable_list{gi};
      });
  return out;
}

}  // namespace

namespace detail {

// The per-axis weights of CUDA upsampling (Note [Separable resampling] in nn/unfold.cpp), from
// the same indices and taps as the CPU kernels (bilinear's in the input's type).
AxisWeights nearest_axis(int64_t in, int64_t out, std::optional<double> scale_factor) {
  AxisWeights m(out, in);
  const std::vector<int64_t> idx = nearest_indices(AxisScale{in, out, scale_factor});
  for (int64_t o = 0; o < out; ++o) m.at(o, idx[o]) = 1;
  return m;
}

AxisWeights linear_axis(int64_t in, int64_t out, std::optional<double> scale_factor,
                        bool align_corners, ScalarType dtype) {
  AxisWeights m(out, in);
  dispatch_floating(dtype, [&]<typename T>() {
    const LinearTaps<T> t = linear_taps<T>(AxisScale{in, out, scale_factor}, align_corners);
    for (int64_t o = 0; o < out; ++o) {
      m.at(o, t.i0[o]) += t.lambda0[o];
      m.at(o, t.i0[o] + t.offset[o]) += t.lambda1[o];
    }
  });
  return m;
}

}  // namespace detail

namespace functional {

Tensor interpolate(const Tensor& input, const InterpolateOptions& o) {
  constexpr const char* kOp = "interpolate";
  detail::check_image_input(kOp, input, /*cuda_ok=*/true);
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
  PlaneShape p = detail::plane_shape(input);
  std::optional<double> sh, sw;
  if (o.size_) {
    p.out_h = o.size_->h;
    p.out_w = o.size_->w;
  } else {
    TL_CHECK(o.scale_factor_->h > 0 && o.scale_factor_->w > 0, kOp,
             ": scale_factor must be positive, got ", *o.scale_factor_);
    p.out_h = static_cast<int64_t>(std::floor(double(p.in_h) * o.scale_factor_->h));
    p.out_w = static_cast<int64_t>(std::floor(double(p.in_w) * o.scale_factor_->w));
    if (!o.recompute_scale_factor_.value_or(false)) {
      sh = o.scale_factor_->h;
      sw = o.scale_factor_->w;
    }
  }
  TL_CHECK(p.in_h > 0 && p.in_w > 0 && p.out_h > 0 && p.out_w > 0, kOp, ": input (", p.in_h, " x ",
           p.in_w, ") and output (", p.out_h, " x ", p.out_w,
           ") sizes should be greater than 0; input shape ", input.sizes());
  const AxisScale ah{p.in_h, p.out_h, sh}, aw{p.in_w, p.out_w, sw};
  const bool align = o.align_corners_.value_or(false);
  if (!detail::direct_image_loops(input)) {
    if (nearest)
      return detail::resample2d(input, detail::nearest_axis(p.in_h, p.out_h, sh),
                                detail::nearest_axis(p.in_w, p.out_w, sw));
    return detail::resample2d(input,
                              detail::linear_axis(p.in_h, p.out_h, sh, align, input.dtype()),
                              detail::linear_axis(p.in_w, p.out_w, sw, align, input.dtype()));
  }
  if (nearest) {
    auto ih = nearest_indices(ah), iw = nearest_indices(aw);
    return resize(
        input, p, "UpsampleNearest2D", "interpolate (nearest)",
        [&](const Tensor& x, const Tensor& out) {
          detail::dispatch_floating(x.dtype(), [&]<typename T>() {
            nearest_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), p, ih, iw);
          });
        },
        [p, ih, iw](const Tensor& go, const Tensor& gi) {
          detail::dispatch_floating(go.dtype(), [&]<typename T>() {
            nearest_backward<T>(go.data_ptr<T>(), gi.data_ptr<T>(), p, ih, iw);
          });
        });
  }
  return resize(
      input, p, "UpsampleBilinear2D", "interpolate (bilinear)",
      [&](const Tensor& x, const Tensor& out) {
        detail::dispatch_floating(x.dtype(), [&]<typename T>() {
          bilinear_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), p, linear_taps<T>(ah, align),
                              linear_taps<T>(aw, align));
        });
      },
      [p, ah, aw, align](const Tensor& go, const Tensor& gi) {
        detail::dispatch_floating(go.dtype(), [&]<typename T>() {
          bilinear_backward<T>(go.data_ptr<T>(), gi.data_ptr<T>(), p, linear_taps<T>(ah, align),
                               linear_taps<T>(aw, align));
        });
      });
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
