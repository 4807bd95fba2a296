// The CPU's pooling kernels (Note [Image kernels] in core/kernels.h): max, average and
// adaptive average pooling with their gradients. Each kernel works on one [H, W] plane at a
// time; planes (N * C of them) are split over the OpenMP threads. Window bounds, divisors and
// tie-breaking follow ATen's CPU kernels
// (aten/src/ATen/native/cpu/{MaxPoolKernel,AvgPoolKernel,AdaptiveAvgPoolKernel}.cpp), so
// results agree with PyTorch's to rounding.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensorlib/core/image_windows.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/im2col.h"
#include "tensorlib/cpu/kernels.h"

namespace tl::cpu {
namespace {

using image::planes_of;
using image::PlaneShape;
using tl::detail::adaptive_end;
using tl::detail::adaptive_start;
using tl::detail::avg_span;
using tl::detail::AvgSpan;
using tl::detail::Window2d;

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
  image::parallel_items(p.planes, p.planes * out_plane * kh * kw, [=](int64_t plane) {
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
  image::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    const int64_t* ix = indices + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t i = 0; i < out_plane; ++i) gi[ix[i]] += go[i];
  });
}

// ---- average -----------------------------------------------------------------------------

// One average window clipped to the input, and what its sum is divided by.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // 0: the window covers no input (output 0)
};

AvgWindow avg_window(int64_t oh, int64_t ow, const PlaneShape& p, const PoolWindow& k,
                     bool count_include_pad, std::optional<int64_t> divisor_override) {
  const AvgSpan h = avg_span(oh, p.in_h, k.kh, k.sh, k.ph),
                w = avg_span(ow, p.in_w, k.kw, k.sw, k.pw);
  if (h.lo >= h.hi || w.lo >= w.hi) return {h.lo, h.hi, w.lo, w.hi, 0};
  const int64_t divisor = divisor_override    ? *divisor_override
                          : count_include_pad ? h.padded * w.padded
                                              : (h.hi - h.lo) * (w.hi - w.lo);
  return {h.lo, h.hi, w.lo, w.hi, divisor};
}

// One adaptive window: its divisor is its area (never 0).
AvgWindow adaptive_window(int64_t oh, int64_t ow, const PlaneShape& p) {
  const int64_t h0 = adaptive_start(oh, p.out_h, p.in_h), h1 = adaptive_end(oh, p.out_h, p.in_h);
  const int64_t w0 = adaptive_start(ow, p.out_w, p.in_w), w1 = adaptive_end(ow, p.out_w, p.in_w);
  return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
}

// Average and adaptive average pooling: each output the sum over its window (in double)
// divided by the window's divisor. `window(oh, ow)` gives the AvgWindow; `work` is the
// elements touched, for the split over threads.
template <typename T, typename Window>
void mean_forward(const T* in, T* out, const PlaneShape& p, int64_t work, Window window) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  image::parallel_items(p.planes, work, [&](int64_t plane) {
    const T* src = in + plane * in_plane;
    T* dst = out + plane * out_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow a = window(oh, ow);
        double sum = 0;
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += src[ih * p.in_w + iw];
        dst[oh * p.out_w + ow] = a.divisor == 0 ? T(0) : static_cast<T>(sum / double(a.divisor));
      }
    }
  });
}

template <typename T, typename Window>
void mean_backward(const T* grad_out, T* grad_in, const PlaneShape& p, int64_t work,
                   Window window) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  image::parallel_items(p.planes, work, [&](int64_t plane) {
    T* gi = grad_in + plane * in_plane;
    const T* go = grad_out + plane * out_plane;
    std::fill(gi, gi + in_plane, T(0));
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow a = window(oh, ow);
        if (a.divisor == 0) continue;
        const T g = go[oh * p.out_w + ow] / static_cast<T>(a.divisor);
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) gi[ih * p.in_w + iw] += g;
      }
    }
  });
}

PoolWindow window_of(const Window2d& g) {
  return {g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}

// The result of `forward(in, out)` over x's planes: a new [N, C, out_h, out_w] tensor of x's
// dtype, computed in float for float16 and bfloat16 (Note [Reduced-precision image kernels]).
template <typename Forward>
Tensor pool_forward(const Tensor& x, const Window2d& g, Forward forward) {
  if (image::is_reduced(x.dtype()))
    return pool_forward(image::to_float(x), g, forward).to(x.dtype());
  const Tensor in = x.contiguous();
  Tensor out = empty({g.batch, g.channels, g.out_h, g.out_w}, x.dtype());
  if (out.numel() > 0) {
    image::dispatch_floating(x.dtype(), [&]<typename T>() {
      forward.template operator()<T>(in.data_ptr<T>(), out.data_ptr<T>());
    });
  }
  return out;
}

// grad_in (contiguous) from `backward(grad_out, grad_in)`, likewise.
template <typename Backward>
void pool_backward(const Tensor& grad_in, const Tensor& grad_out, Backward backward) {
  if (image::is_reduced(grad_in.dtype())) {
    const Tensor gi = image::float_buffer_for(grad_in);
    pool_backward(gi, image::to_float(grad_out), backward);
    image::round_into(grad_in, gi);
    return;
  }
  const Tensor go = grad_out.contiguous();
  image::dispatch_floating(grad_in.dtype(), [&]<typename T>() {
    backward.template operator()<T>(go.data_ptr<T>(), grad_in.data_ptr<T>());
  });
}

}  // namespace

Tensor Kernels::max_pool2d(const Tensor& x, const Window2d& g, Tensor& indices) const {
  if (image::is_reduced(x.dtype()))  // exact: the maximum is one of the values
    return max_pool2d(image::to_float(x), g, indices).to(x.dtype());
  const PlaneShape p = planes_of(g);
  const PoolWindow k = window_of(g);
  const Tensor in = x.contiguous();
  // The values, then the indices, as PyTorch allocates them.
  Tensor out = empty({g.batch, g.channels, g.out_h, g.out_w}, x.dtype());
  indices = empty(out.sizes(), kInt64);
  if (out.numel() > 0) {
    image::dispatch_floating(x.dtype(), [&]<typename T>() {
      max_pool_forward<T>(in.data_ptr<T>(), out.data_ptr<T>(), indices.data_ptr<int64_t>(), p, k);
    });
  }
  return out;
}

void Kernels::max_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out,
                                  const Tensor& indices, const Window2d& g) const {
  const PlaneShape p = planes_of(g);
  const Tensor ix = indices.contiguous();
  pool_backward(grad_in, grad_out, [&]<typename T>(const T* go, T* gi) {
    max_pool_backward<T>(go, ix.data_ptr<int64_t>(), gi, p);
  });
}

Tensor Kernels::avg_pool2d(const Tensor& x, const Window2d& g,
                           const tl::detail::AvgPool2d& a) const {
  const PlaneShape p = planes_of(g);
  const PoolWindow k = window_of(g);
  const auto window = [&](int64_t oh, int64_t ow) {
    return avg_window(oh, ow, p, k, a.count_include_pad, a.divisor_override);
  };
  return pool_forward(x, g, [&]<typename T>(const T* in, T* out) {
    mean_forward<T>(in, out, p, p.planes * p.out_h * p.out_w * k.kh * k.kw, window);
  });
}

void Kernels::avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Window2d& g,
                                  const tl::detail::AvgPool2d& a) const {
  const PlaneShape p = planes_of(g);
  const PoolWindow k = window_of(g);
  const auto window = [&](int64_t oh, int64_t ow) {
    return avg_window(oh, ow, p, k, a.count_include_pad, a.divisor_override);
  };
  pool_backward(grad_in, grad_out, [&]<typename T>(const T* go, T* gi) {
    mean_backward<T>(go, gi, p, p.planes * p.out_h * p.out_w * k.kh * k.kw, window);
  });
}

Tensor Kernels::adaptive_avg_pool2d(const Tensor& x, const Window2d& g) const {
  const PlaneShape p = planes_of(g);
  const auto window = [&](int64_t oh, int64_t ow) { return adaptive_window(oh, ow, p); };
  return pool_forward(x, g, [&]<typename T>(const T* in, T* out) {
    mean_forward<T>(in, out, p, p.planes * (p.in_h * p.in_w + p.out_h * p.out_w), window);
  });
}

void Kernels::adaptive_avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out,
                                           const Window2d& g) const {
  const PlaneShape p = planes_of(g);
  const auto window = [&](int64_t oh, int64_t ow) { return adaptive_window(oh, ow, p); };
  pool_backward(grad_in, grad_out, [&]<typename T>(const T* go, T* gi) {
    mean_backward<T>(go, gi, p, p.planes * (p.in_h * p.in_w + p.out_h * p.out_w), window);
  });
}

}  // namespace tl::cpu
