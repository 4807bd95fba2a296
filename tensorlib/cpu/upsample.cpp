// The CPU's interpolate kernels (Note [Image kernels] in core/kernels.h): "nearest" and
// "bilinear" with their gradients. Source indices and weights are computed once per output row
// and column with ATen's formulas (core/image_windows.h): nearest's scale is a float for every
// dtype, bilinear's is the type the kernel computes in.
#include <algorithm>
#include <vector>

#include "tensorlib/core/image_windows.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/im2col.h"
#include "tensorlib/cpu/kernels.h"

namespace tl::cpu {
namespace {

using image::planes_of;
using image::PlaneShape;
using tl::detail::AxisScale;
using tl::detail::linear_taps;
using tl::detail::LinearTaps;
using tl::detail::nearest_indices;
using tl::detail::Resize2d;
using tl::detail::Window2d;

template <typename T>
void nearest_forward(const T* in, T* out, const PlaneShape& p, const std::vector<int64_t>& ih,
                     const std::vector<int64_t>& iw) {
  const int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  image::parallel_items(p.planes, p.planes * out_plane, [&](int64_t plane) {
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
  image::parallel_items(p.planes, p.planes * (in_plane + out_plane), [&](int64_t plane) {
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
  image::parallel_items(p.planes, p.planes * out_plane * 4, [&](int64_t plane) {
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
  image::parallel_items(p.planes, p.planes * (in_plane + 4 * out_plane), [&](int64_t plane) {
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

// The per-axis scales of an interpolation of g.
AxisScale rows_of(const Window2d& g, const Resize2d& r) {
  return {g.height, g.out_h, r.scale_h};
}
AxisScale cols_of(const Window2d& g, const Resize2d& r) {
  return {g.width, g.out_w, r.scale_w};
}

}  // namespace

// float16 and bfloat16 through float (Note [Reduced-precision image kernels]).
Tensor Kernels::upsample2d(const Tensor& x, const Window2d& g, const Resize2d& r) const {
  if (image::is_reduced(x.dtype())) return upsample2d(image::to_float(x), g, r).to(x.dtype());
  const PlaneShape p = planes_of(g);
  const Tensor in = x.contiguous();
  Tensor out = empty({g.batch, g.channels, g.out_h, g.out_w}, x.dtype());
  if (out.numel() == 0) return out;
  image::dispatch_floating(x.dtype(), [&]<typename T>() {
    if (r.bilinear) {
      bilinear_forward<T>(in.data_ptr<T>(), out.data_ptr<T>(), p,
                          linear_taps<T>(rows_of(g, r), r.align_corners),
                          linear_taps<T>(cols_of(g, r), r.align_corners));
    } else {
      nearest_forward<T>(in.data_ptr<T>(), out.data_ptr<T>(), p, nearest_indices(rows_of(g, r)),
                         nearest_indices(cols_of(g, r)));
    }
  });
  return out;
}

void Kernels::upsample2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Window2d& g,
                                  const Resize2d& r) const {
  if (image::is_reduced(grad_in.dtype())) {
    const Tensor gi = image::float_buffer_for(grad_in);
    upsample2d_backward(gi, image::to_float(grad_out), g, r);
    image::round_into(grad_in, gi);
    return;
  }
  const PlaneShape p = planes_of(g);
  const Tensor go = grad_out.contiguous();
  image::dispatch_floating(grad_in.dtype(), [&]<typename T>() {
    if (r.bilinear) {
      bilinear_backward<T>(go.data_ptr<T>(), grad_in.data_ptr<T>(), p,
                           linear_taps<T>(rows_of(g, r), r.align_corners),
                           linear_taps<T>(cols_of(g, r), r.align_corners));
    } else {
      nearest_backward<T>(go.data_ptr<T>(), grad_in.data_ptr<T>(), p,
                          nearest_indices(rows_of(g, r)), nearest_indices(cols_of(g, r)));
    }
  });
}

}  // namespace tl::cpu
