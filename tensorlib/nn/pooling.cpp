// CPU max, average and adaptive average pooling with their gradients, and their modules.
// Each kernel works on one [H, W] plane at a time; planes (N * C of them) are split over the
// OpenMP threads. Window bounds, divisors and tie-breaking follow ATen's CPU kernels
// (aten/src/ATen/native/cpu/{MaxPoolKernel,AvgPoolKernel,AdaptiveAvgPoolKernel}.cpp), so
// results agree with PyTorch's to rounding.
#include "tensorlib/nn/pooling.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensorlib/autograd/function.h"
#include "tensorlib/cpu/loops.h"
#include "tensorlib/nn/im2col.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace {

using autograd::variable_list;
using detail::PlaneShape;

struct PoolWindow {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// ---- max ---------------------------------------------------------------------------------

// Parameters are copied into locals: the int64 index stores could otherwise alias them and
// force reloads in the inner loop. The running maximum is updated without a branch (a
// data-dependent branch mispredicts on every other element of natural images).
template <typename T>
void max_pool_forward(const T* in, T* out, int64_t* indices, const PlaneShape& p,
                      const PoolWindow& k) {
  const int64_t in_h = p.in_h, in_w = p.in_w, out_h = p.out_h, out_w = p.out_w;
  const int64_t kh = k.kh, kw = k.kw, sh = k.sh, sw = k.sw, ph = k.ph, pw = k.pw, dh = k.dh,
                dw = k.dw;
  const int64_t in_plane = in_h * in_w, out_plane = out_h * out_w;
  // Every window inside the input (no padding, no ceil_mode overhang): each output row is
  // updated with one window element at a time, in the window's scan order, so the loop over
  // the row's outputs vectorises.
  const bool inside = in_plane <= INT32_MAX && ph == 0 && pw == 0 &&
                      (out_h - 1) * sh + (kh - 1) * dh < in_h &&
                      (out_w - 1) * sw + (kw - 1) * dw < in_w;
  detail::parallel_items(p.planes, p.planes * out_plane * kh * kw, [=](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    int64_t* ix = indices + plane * out_plane;
    if (inside) {
      // Window-local state in arrays of one element width (float with int32 indices, double
      // with int64), so the compare-and-select loop vectorises.
      using Index = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
      constexpr int64_t kChunk = 256;
      T vals[kChunk], best[kChunk];
      Index best_index[kChunk];
      for (int64_t oh = 0; oh < out_h; ++oh) {
        for (int64_t ow0 = 0; ow0 < out_w; ow0 += kChunk) {
          const int64_t n = std::min(kChunk, out_w - ow0);
          for (int64_t o = 0; o < n; ++o) {
            best[o] = -std::numeric_limits<T>::infinity();
            best_index[o] = static_cast<Index>(oh * sh * in_w + (ow0 + o) * sw);
          }
          for (int64_t i = 0; i < kh; ++i) {
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t first = (oh * sh + i * dh) * in_w + j * dw + ow0 * sw;
              const T* s = src + first;
              for (int64_t o = 0; o < n; ++o) vals[o] = s[o * sw];
              const Index first_index = static_cast<Index>(first), step = static_cast<Index>(sw);
              for (int64_t o = 0; o < n; ++o) {
                const T v = vals[o], b = best[o];
                const bool take = (v > b) | (v != v);  // v != v: a NaN wins, as in ATen
                best[o] = take ? v : b;
                best_index[o] = take ? first_index + static_cast<Index>(o) * step : best_index[o];
              }
            }
          }
          T* d = dst + oh * out_w + ow0;
          int64_t* x = ix + oh * out_w + ow0;
          for (int64_t o = 0; o < n; ++o) {
            d[o] = best[o];
            x[o] = best_index[o];
          }
        }
      }
      return;
    }
    for (int64_t oh = 0; oh < out_h; ++oh) {
      int64_t h0 = oh * sh - ph;
      const int64_t h1 = std::min(h0 + (kh - 1) * dh + 1, in_h);
      while (h0 < 0) h0 += dh;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        int64_t w0 = ow * sw - pw;
        const int64_t w1 = std::min(w0 + (kw - 1) * dw + 1, in_w);
        while (w0 < 0) w0 += dw;
        int64_t best_index = h0 * in_w + w0;
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t ih = h0; ih < h1; ih += dh) {
          for (int64_t iw = w0; iw < w1; iw += dw) {
            const int64_t i = ih * in_w + iw;
            const T v = src[i];
            const bool take = (v > best) | (v != v);  // v != v: NaN wins, as in ATen
            best = take ? v : best;
            best_index = take ? i : best_index;
          }
        }
        dst[oh * out_w + ow] = best;
        ix[oh * out_w + ow] = best_index;
      }
    }
  });
}

template <typename T>
void max_pool_backward(const T* grad_out, const int64_t* indices, T* grad_in, const PlaneShape& p) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    const int64_t* ix = indices + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t i = 0; i < out_plane; ++i) gi[ix[i]] += go[i];
  });
}

// ---- average -----------------------------------------------------------------------------

// One axis of an average window: its clipped range [lo, hi) and its length within the padded
// input (the count_include_pad divisor's factor).
struct AvgSpan {
  int64_t lo, hi, padded;
};

AvgSpan avg_span(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t lo = o * stride - pad, hi = std::min(lo + kernel, in + pad);
  return {std::max<int64_t>(lo, 0), std::min(hi, in), hi - lo};
}

// One average window clipped to the input, and what its sum is divided by.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // 0: the window covers no input (output 0)
};

AvgWindow avg_window(int64_t oh, int64_t ow, const PlaneShape& p, const PoolWindow& k,
                     bool count_include_pad, std::optional<int64_t> divisor_override) {
  const AvgSpan h = avg_span(oh, p.in_h, k.kh, k.sh, k.ph), w = avg_span(ow, p.in_w, k.kw, k.sw, k.pw);
  if (h.lo >= h.hi || w.lo >= w.hi) return {h.lo, h.hi, w.lo, w.hi, 0};
  const int64_t divisor = divisor_override    ? *divisor_override
                          : count_include_pad ? h.padded * w.padded
                                              : (h.hi - h.lo) * (w.hi - w.lo);
  return {h.lo, h.hi, w.lo, w.hi, divisor};
}

template <typename T>
void avg_pool_forward(const T* in, T* out, const PlaneShape& p, const PoolWindow& k,
                      bool count_include_pad, std::optional<int64_t> divisor_override) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * out_plane * k.kh * k.kw, [&](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow a = avg_window(oh, ow, p, k, count_include_pad, divisor_override);
        double sum = 0;
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += src[ih * p.in_w + iw];
        dst[oh * p.out_w + ow] = a.divisor == 0 ? T(0) : static_cast<T>(sum / a.divisor);
      }
    }
  });
}

template <typename T>
void avg_pool_backward(const T* grad_out, T* grad_in, const PlaneShape& p, const PoolWindow& k,
                       bool count_include_pad, std::optional<int64_t> divisor_override) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * out_plane * k.kh * k.kw, [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow a = avg_window(oh, ow, p, k, count_include_pad, divisor_override);
        if (a.divisor == 0) continue;
        const T g = go[oh * p.out_w + ow] / static_cast<T>(a.divisor);
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) gi[ih * p.in_w + iw] += g;
      }
    }
  });
}

// ---- adaptive average --------------------------------------------------------------------

// ATen's start_index / end_index: floor(i * in / out) and ceil((i + 1) * in / out).
int64_t adaptive_start(int64_t i, int64_t out, int64_t in) {
  return (i * in) / out;
}
int64_t adaptive_end(int64_t i, int64_t out, int64_t in) {
  return ((i + 1) * in + out - 1) / out;
}


template <typename T>
void adaptive_avg_forward(const T* in, T* out, const PlaneShape& p) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const int64_t h0 = adaptive_start(oh, p.out_h, p.in_h),
                    h1 = adaptive_end(oh, p.out_h, p.in_h);
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t w0 = adaptive_start(ow, p.out_w, p.in_w);
        const int64_t w1 = adaptive_end(ow, p.out_w, p.in_w);
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += src[ih * p.in_w + iw];
        dst[oh * p.out_w + ow] = static_cast<T>(sum / double((h1 - h0) * (w1 - w0)));
      }
    }
  });
}

template <typename T>
void adaptive_avg_backward(const T* grad_out, T* grad_in, const PlaneShape& p) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  detail::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const int64_t h0 = adaptive_start(oh, p.out_h, p.in_h),
                    h1 = adaptive_end(oh, p.out_h, p.in_h);
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t w0 = adaptive_start(ow, p.out_w, p.in_w);
        const int64_t w1 = adaptive_end(ow, p.out_w, p.in_w);
        const T g = go[oh * p.out_w + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) gi[ih * p.in_w + iw] += g;
      }
    }
  });
}

// ---- shared checks -----------------------------------------------------------------------

void check_window(const char* op, IntPair kernel, IntPair stride, IntPair padding,
                  IntPair dilation) {
  TL_CHECK(kernel.h > 0 && kernel.w > 0, op, ": kernel_size must be positive, got ", kernel);
  TL_CHECK(stride.h > 0 && stride.w > 0, op, ": stride must be positive, got ", stride);
  TL_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation must be positive, got ", dilation);
  TL_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding must be non-negative, got ", padding);
}

// ATen's pooling_output_shape: floor or ceil division; with ceil_mode the last window must
// start inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

PlaneShape pooled_shape(const char* op, const Tensor& x, IntPair kernel, IntPair stride,
                        IntPair padding, IntPair dilation, bool ceil_mode) {
  PlaneShape p = detail::plane_shape(x);
  p.out_h = pooled_size(p.in_h, kernel.h, stride.h, padding.h, dilation.h, ceil_mode);
  p.out_w = pooled_size(p.in_w, kernel.w, stride.w, padding.w, dilation.w, ceil_mode);
  TL_CHECK(p.out_h > 0 && p.out_w > 0, op, ": input of shape ", x.sizes(), " gives an output of ",
           p.out_h, " x ", p.out_w, " with kernel_size ", kernel, ", stride ", stride, ", padding ",
           padding, " and dilation ", dilation, ": output size is too small");
  return p;
}

// Max pooling composed (on CUDA): the windows unfolded with -inf padding, the maximum of each (the first
// on ties, NaN first, as the CPU kernel), and its position turned into the flat index into the
// input plane that PyTorch returns. The gradient flows through max and unfold (col2im).
std::tuple<Tensor, Tensor> max_pool2d_composed(const Tensor& input, const PlaneShape& p, IntPair k,
                                               IntPair s, IntPair pad, IntPair d) {
  const int64_t n = input.size(0), c = input.size(1);
  const tl::detail::Window2d win{n * c, 1, p.in_h, p.in_w, k.h, k.w, s.h, s.w,
                                 pad.h, pad.w, d.h, d.w, p.out_h, p.out_w};
  const Tensor cols = detail::unfold2d(input.reshape({n * c, 1, p.in_h, p.in_w}), win,
                                       -std::numeric_limits<double>::infinity());
  auto [values, at] = cols.max(1);  // [n*c, out_h*out_w]
  const TensorOptions i64 = TensorOptions(kInt64).device(input.device());
  // at = ki * kw + kj; the pixel is (oh*sh - ph + ki*dh, ow*sw - pw + kj*dw).
  const Tensor ki = at.div(k.w).to(kInt64), kj = at - ki * k.w;
  const Tensor oh = arange(p.out_h, i64).view({p.out_h, 1}).expand({p.out_h, p.out_w}).reshape({-1});
  const Tensor ow = arange(p.out_w, i64).view({1, p.out_w}).expand({p.out_h, p.out_w}).reshape({-1});
  const Tensor hh = oh * s.h - pad.h + ki * d.h, ww = ow * s.w - pad.w + kj * d.w;
  Tensor indices = (hh * p.in_w + ww).view({n, c, p.out_h, p.out_w});
  return {values.view({n, c, p.out_h, p.out_w}), indices};
}

}  // namespace

namespace detail {

// The per-axis weights of average pooling on CUDA (Note [Separable resampling] in
// nn/unfold.cpp): 1 / the axis's factor of the divisor over the window's span; with a
// divisor_override, 1 over the rows and 1 / override over the columns.
AxisWeights avg_pool_axis(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                             bool count_include_pad, std::optional<int64_t> divisor_override,
                             bool carries_override) {
  AxisWeights a(out, in);
  for (int64_t o = 0; o < out; ++o) {
    const AvgSpan s = avg_span(o, in, kernel, stride, pad);
    const double weight = divisor_override    ? (carries_override ? 1.0 / double(*divisor_override) : 1.0)
                          : count_include_pad ? 1.0 / double(s.padded)
                                              : 1.0 / double(s.hi - s.lo);
    for (int64_t i = s.lo; i < s.hi; ++i) a.at(o, i) = weight;
  }
  return a;
}

// Adaptive pooling's per-axis weights on CUDA (Note [Separable resampling]).
AxisWeights adaptive_pool_axis(int64_t out, int64_t in) {
  AxisWeights a(out, in);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t lo = adaptive_start(o, out, in), hi = adaptive_end(o, out, in);
    for (int64_t i = lo; i < hi; ++i) a.at(o, i) = 1.0 / double(hi - lo);
  }
  return a;
}

}  // namespace detail

namespace functional {

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntPair kernel_size,
                                                   std::optional<IntPair> stride_opt,
                                                   IntPair padding, IntPair dilation,
                                                   bool ceil_mode) {
  constexpr const char* kOp = "max_pool2d";
  detail::check_image_input(kOp, input, /*cuda_ok=*/true);
  const IntPair stride = stride_opt.value_or(kernel_size);
  check_window(kOp, kernel_size, stride, padding, dilation);
  TL_CHECK(2 * padding.h <= (kernel_size.h - 1) * dilation.h + 1 &&
               2 * padding.w <= (kernel_size.w - 1) * dilation.w + 1,
           kOp, ": padding ", padding, " should be at most half of the effective kernel size (",
           kernel_size, " with dilation ", dilation, ")");
  if (input.dim() == 3) {
    auto [out, ix] = max_pool2d_with_indices(input.unsqueeze(0), kernel_size, stride, padding,
                                             dilation, ceil_mode);
    return {out.squeeze(0), ix.squeeze(0)};
  }
  const PlaneShape p = pooled_shape(kOp, input, kernel_size, stride, padding, dilation, ceil_mode);
  if (!detail::direct_image_loops(input))
    return max_pool2d_composed(input, p, kernel_size, stride, padding, dilation);
  const PoolWindow k{kernel_size.h, kernel_size.w, stride.h,   stride.w,
                     padding.h,     padding.w,     dilation.h, dilation.w};
  const Tensor x = input.contiguous();
  Tensor out = empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.dtype());
  Tensor indices = empty(out.sizes(), kInt64);
  detail::dispatch_floating(input.dtype(), [&]<typename T>() {
    max_pool_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), indices.data_ptr<int64_t>(), p, k);
  });
  autograd::record(
      out, "MaxPool2DWithIndices", {&input}, {indices},
      [p, in_sizes = input.sizes().vec()](const variable_list& g, const variable_list& s) {
        detail::check_no_double_backward("max_pool2d");
        const Tensor go = g[0].contiguous();
        Tensor gi = empty(in_sizes, go.dtype());
        detail::dispatch_floating(go.dtype(), [&]<typename T>() {
          max_pool_backward<T>(go.data_ptr<T>(), s[0].data_ptr<int64_t>(), gi.data_ptr<T>(), p);
        });
        return variable_list{gi};
      });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride,
                  IntPair padding, IntPair dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride_opt,
                  IntPair padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  constexpr const char* kOp = "avg_pool2d";
  detail::check_image_input(kOp, input, /*cuda_ok=*/true);
  const IntPair stride = stride_opt.value_or(kernel_size);
  check_window(kOp, kernel_size, stride, padding, 1);
  TL_CHECK(2 * padding.h <= kernel_size.h && 2 * padding.w <= kernel_size.w, kOp, ": padding ",
           padding, " should be at most half of kernel_size ", kernel_size);
  TL_CHECK(!divisor_override || *divisor_override != 0, kOp, ": divisor_override must be non-zero");
  if (input.dim() == 3)
    return avg_pool2d(input.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override)
        .squeeze(0);
  const PlaneShape p = pooled_shape(kOp, input, kernel_size, stride, padding, 1, ceil_mode);
  const PoolWindow k{kernel_size.h, kernel_size.w, stride.h, stride.w, padding.h, padding.w, 1, 1};
  if (!detail::direct_image_loops(input))
    return detail::resample2d(
        input,
        detail::avg_pool_axis(p.out_h, p.in_h, k.kh, k.sh, k.ph, count_include_pad, divisor_override, false),
        detail::avg_pool_axis(p.out_w, p.in_w, k.kw, k.sw, k.pw, count_include_pad, divisor_override, true));
  const Tensor x = input.contiguous();
  Tensor out = empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.dtype());
  detail::dispatch_floating(input.dtype(), [&]<typename T>() {
    avg_pool_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), p, k, count_include_pad,
                        divisor_override);
  });
  autograd::record(out, "AvgPool2D", {&input}, {},
                   [p, k, count_include_pad, divisor_override, in_sizes = input.sizes().vec()](
                       const variable_list& g, const variable_list&) {
                     detail::check_no_double_backward("avg_pool2d");
                     const Tensor go = g[0].contiguous();
                     Tensor gi = empty(in_sizes, go.dtype());
                     detail::dispatch_floating(go.dtype(), [&]<typename T>() {
                       avg_pool_backward<T>(go.data_ptr<T>(), gi.data_ptr<T>(), p, k,
                                            count_include_pad, divisor_override);
                     });
                     return variable_list{gi};
                   });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntPair output_size) {
  constexpr const char* kOp = "adaptive_avg_pool2d";
  detail::check_image_input(kOp, input, /*cuda_ok=*/true);
  TL_CHECK(output_size.h > 0 && output_size.w > 0, kOp, ": output_size must be positive, got ",
           output_size);
  if (input.dim() == 3) return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0);
  PlaneShape p = detail::plane_shape(input);
  TL_CHECK(p.in_h > 0 && p.in_w > 0, kOp, ": expected an input with non-empty H and W, got shape ",
           input.sizes());
  p.out_h = output_size.h;
  p.out_w = output_size.w;
  if (!detail::direct_image_loops(input))
    return detail::resample2d(input, detail::adaptive_pool_axis(p.out_h, p.in_h),
                              detail::adaptive_pool_axis(p.out_w, p.in_w));
  const Tensor x = input.contiguous();
  Tensor out = empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.dtype());
  detail::dispatch_floating(input.dtype(), [&]<typename T>() {
    adaptive_avg_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), p);
  });
  autograd::record(
      out, "AdaptiveAvgPool2D", {&input}, {},
      [p, in_sizes = input.sizes().vec()](const variable_list& g, const variable_list&) {
        detail::check_no_double_backward("adaptive_avg_pool2d");
        const Tensor go = g[0].contiguous();
        Tensor gi = empty(in_sizes, go.dtype());
        detail::dispatch_floating(go.dtype(), [&]<typename T>() {
          adaptive_avg_backward<T>(go.data_ptr<T>(), gi.data_ptr<T>(), p);
        });
        return variable_list{gi};
      });
  return out;
}

}  // namespace functional

MaxPool2d::MaxPool2d(IntPair kernel, std::optional<IntPair> stride_opt, IntPair pad, IntPair dil,
                     bool ceil)
    : Module("max_pool2d"),
      kernel_size(kernel),
      stride(stride_opt.value_or(kernel)),
      padding(pad),
      dilation(dil),
      ceil_mode(ceil) {
  check_window("MaxPool2d", kernel_size, stride, padding, dilation);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return functional::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

AvgPool2d::AvgPool2d(IntPair kernel, std::optional<IntPair> stride_opt, IntPair pad, bool ceil,
                     bool include_pad, std::optional<int64_t> divisor)
    : Module("avg_pool2d"),
      kernel_size(kernel),
      stride(stride_opt.value_or(kernel)),
      padding(pad),
      ceil_mode(ceil),
      count_include_pad(include_pad),
      divisor_override(divisor) {
  check_window("AvgPool2d", kernel_size, stride, padding, 1);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                divisor_override);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntPair size)
    : Module("adaptive_avg_pool2d"), output_size(size) {
  TL_CHECK(output_size.h > 0 && output_size.w > 0,
           "AdaptiveAvgPool2d: output_size must be positive, got ", output_size);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return functional::adaptive_avg_pool2d(x, output_size);
}

}  // namespace tl::nn
