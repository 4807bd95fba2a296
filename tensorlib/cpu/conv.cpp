// The CPU's convolution kernels (Note [Image kernels] in core/kernels.h): im2col + one BLAS
// product per group over chunks of images (Note [Convolution as one GEMM per group] in
// cpu/im2col.h), and the table's im2col/col2im entries.
//
// conv_transpose2d is conv2d's backward-to-input run forward, so the two share every kernel:
// conv2d forward is im2col -> gemm -> NCHW, conv_transpose2d forward is channel-major ->
// gemm^T -> col2im, and each one's backward is the other's forward (plus the weight product).
// Backward recomputes the columns from the saved input instead of keeping them, so the saved
// activations are the input and weight only, as in PyTorch.
#include <algorithm>

#include "tensorlib/core/image_windows.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/im2col.h"
#include "tensorlib/cpu/kernels.h"

namespace tl::cpu {
namespace {

using image::WindowGeometry;
using tl::detail::images_per_chunk;
using tl::detail::Window2d;

struct ConvShape {
  int64_t batch, in_channels, out_channels, groups;
  WindowGeometry g;  // conv2d: the input image; conv_transpose2d: the output image
};

template <typename T>
void conv2d_forward_kernel(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, out_g = s.out_channels / s.groups;
  const int64_t per_image = s.in_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = empty({g.rows() * nb * L}, scalar_type_of<T>());
  Tensor out_cm = nb > 1 ? empty({s.out_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    T* c = col.data_ptr<T>();
    // One image: the channel-major product is already NCHW, so it goes straight to y.
    T* dst = cnt == 1 ? y + n0 * s.out_channels * L : out_cm.data_ptr<T>();
    image::im2col(x + n0 * per_image, cnt, g, c);
    for (int64_t grp = 0; grp < s.groups; ++grp)
      image::gemm<T>(false, false, out_g, cols, rows_g, 1, w + grp * out_g * rows_g, rows_g,
                     c + grp * rows_g * cols, cols, 0, dst + grp * out_g * cols, cols);
    if (cnt == 1) {
      if (b)
        for (int64_t o = 0; o < s.out_channels; ++o)
          for (int64_t k = 0; k < L; ++k) dst[o * L + k] += b[o];
    } else {
      image::from_channel_major(dst, cnt, s.out_channels, L, b, y + n0 * s.out_channels * L);
    }
  }
}

// gx, gw, gb may be null (not needed); gw and gb are overwritten.
template <typename T>
void conv2d_backward_kernel(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                            const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, out_g = s.out_channels / s.groups;
  const int64_t per_image = s.in_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = gx || gw ? empty({g.rows() * nb * L}, scalar_type_of<T>()) : Tensor();
  Tensor gy_cm = nb > 1 ? empty({s.out_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  if (gb) std::fill(gb, gb + s.out_channels, T(0));
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    const T* gyc = gy + n0 * s.out_channels * L;
    if (cnt > 1) {
      image::to_channel_major(gyc, cnt, s.out_channels, L, gy_cm.data_ptr<T>());
      gyc = gy_cm.data_ptr<T>();
    }
    if (gb) image::add_row_sums(gyc, s.out_channels, cols, gb);
    if (gw) {
      T* c = col.data_ptr<T>();
      image::im2col(x + n0 * per_image, cnt, g, c);
      for (int64_t grp = 0; grp < s.groups; ++grp)
        image::gemm<T>(false, true, out_g, rows_g, cols, 1, gyc + grp * out_g * cols, cols,
                       c + grp * rows_g * cols, cols, n0 == 0 ? 0 : 1, gw + grp * out_g * rows_g,
                       rows_g);
    }
    if (gx) {
      T* c = col.data_ptr<T>();
      for (int64_t grp = 0; grp < s.groups; ++grp)
        image::gemm<T>(true, false, rows_g, cols, out_g, 1, w + grp * out_g * rows_g, rows_g,
                       gyc + grp * out_g * cols, cols, 0, c + grp * rows_g * cols, cols);
      image::col2im(c, cnt, g, gx + n0 * per_image);
    }
  }
}

// ---- conv_transpose2d ---------------------------------------------------------------------
// Here g describes the *output* image (channels = out_channels) and its positions are the
// input's pixels; the weight is [in, out / groups, kH, kW], i.e. per group the transpose of
// conv2d's [out', rows'] matrix with out' = in / groups.

template <typename T>
void add_bias_planes(T* y, const T* b, int64_t batch, int64_t channels, int64_t spatial) {
  image::parallel_items(batch * channels, batch * channels * spatial, [&](int64_t item) {
    const T v = b[item % channels];
    T* p = y + item * spatial;
    for (int64_t k = 0; k < spatial; ++k) p[k] += v;
  });
}

template <typename T>
void conv_transpose2d_forward_kernel(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, in_g = s.in_channels / s.groups;
  const int64_t out_image = s.out_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = empty({g.rows() * nb * L}, scalar_type_of<T>());
  Tensor x_cm = nb > 1 ? empty({s.in_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    const T* xc = x + n0 * s.in_channels * L;
    if (cnt > 1) {
      image::to_channel_major(xc, cnt, s.in_channels, L, x_cm.data_ptr<T>());
      xc = x_cm.data_ptr<T>();
    }
    T* c = col.data_ptr<T>();
    for (int64_t grp = 0; grp < s.groups; ++grp)
      image::gemm<T>(true, false, rows_g, cols, in_g, 1, w + grp * in_g * rows_g, rows_g,
                     xc + grp * in_g * cols, cols, 0, c + grp * rows_g * cols, cols);
    image::col2im(c, cnt, g, y + n0 * out_image);
  }
  if (b) add_bias_planes(y, b, s.batch, s.out_channels, g.height * g.width);
}

template <typename T>
void conv_transpose2d_backward_kernel(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                                      const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, in_g = s.in_channels / s.groups;
  const int64_t out_image = s.out_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = gx || gw ? empty({g.rows() * nb * L}, scalar_type_of<T>()) : Tensor();
  Tensor cm = nb > 1 ? empty({s.in_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  if (gb) {
    std::fill(gb, gb + s.out_channels, T(0));
    for (int64_t n = 0; n < s.batch; ++n)
      image::add_row_sums(gy + n * out_image, s.out_channels, g.height * g.width, gb);
  }
  for (int64_t n0 = 0; n0 < s.batch && (gx || gw); n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    T* c = col.data_ptr<T>();
    image::im2col(gy + n0 * out_image, cnt, g, c);
    if (gx) {
      T* dst = cnt == 1 ? gx + n0 * s.in_channels * L : cm.data_ptr<T>();
      for (int64_t grp = 0; grp < s.groups; ++grp)
        image::gemm<T>(false, false, in_g, cols, rows_g, 1, w + grp * in_g * rows_g, rows_g,
                       c + grp * rows_g * cols, cols, 0, dst + grp * in_g * cols, cols);
      if (cnt > 1)
        image::from_channel_major<T>(dst, cnt, s.in_channels, L, nullptr,
                                     gx + n0 * s.in_channels * L);
    }
    if (gw) {
      const T* xc = x + n0 * s.in_channels * L;
      if (cnt > 1) {
        image::to_channel_major(xc, cnt, s.in_channels, L, cm.data_ptr<T>());
        xc = cm.data_ptr<T>();
      }
      for (int64_t grp = 0; grp < s.groups; ++grp)
        image::gemm<T>(false, true, in_g, rows_g, cols, 1, xc + grp * in_g * cols, cols,
                       c + grp * rows_g * cols, cols, n0 == 0 ? 0 : 1, gw + grp * in_g * rows_g,
                       rows_g);
    }
  }
}

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mutable_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// conv2d's shape from its input geometry; conv_transpose2d's from its output geometry.
ConvShape conv_shape(const Window2d& g, int64_t in_channels, int64_t out_channels, int64_t groups) {
  return {g.batch, in_channels, out_channels, groups, image::geometry_of(g)};
}

// forward(x, w, b, y, shape) into a new [batch, out_channels, oh, ow] result.
template <typename Forward>
Tensor run_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ConvShape& s, int64_t oh, int64_t ow, Forward forward) {
  if (image::is_reduced(input.dtype()))  // Note [Reduced-precision image kernels]
    return run_forward(image::to_float(input), image::to_float(weight), image::to_float(bias), s,
                       oh, ow, forward)
        .to(input.dtype());
  const Tensor x = input.contiguous(), w = weight.contiguous();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = empty({s.batch, s.out_channels, oh, ow}, input.dtype());
  if (out.numel() > 0) {
    image::dispatch_floating(input.dtype(), [&]<typename T>() {
      forward(x.data_ptr<T>(), w.data_ptr<T>(), ptr_or_null<T>(b), out.data_ptr<T>(), s);
    });
  }
  return out;
}

// backward(gy, x, w, gx, gw, gb, shape) for the gradients that are defined.
template <typename Backward>
void run_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                  const Tensor& gx, const Tensor& gw, const Tensor& gb, const ConvShape& s,
                  Backward backward) {
  if (image::is_reduced(input.dtype())) {  // Note [Reduced-precision image kernels]
    const Tensor fx = image::float_buffer_for(gx), fw = image::float_buffer_for(gw),
                 fb = image::float_buffer_for(gb);
    run_backward(image::to_float(grad_out), image::to_float(input), image::to_float(weight), fx, fw,
                 fb, s, backward);
    image::round_into(gx, fx);
    image::round_into(gw, fw);
    image::round_into(gb, fb);
    return;
  }
  const Tensor gy = grad_out.contiguous(), x = input.contiguous(), w = weight.contiguous();
  image::dispatch_floating(x.dtype(), [&]<typename T>() {
    backward(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr<T>(), mutable_ptr_or_null<T>(gx),
             mutable_ptr_or_null<T>(gw), mutable_ptr_or_null<T>(gb), s);
  });
}

}  // namespace

Tensor Kernels::conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& g,
                       int64_t groups) const {
  const ConvShape s = conv_shape(g, g.channels, weight.size(0), groups);
  return run_forward(
      x, weight, bias, s, g.out_h, g.out_w,
      []<typename T>(const T* xp, const T* wp, const T* bp, T* yp, const ConvShape& shape) {
        conv2d_forward_kernel<T>(xp, wp, bp, yp, shape);
      });
}

void Kernels::conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                              const Tensor& gx, const Tensor& gw, const Tensor& gb,
                              const Window2d& g, int64_t groups) const {
  const ConvShape s = conv_shape(g, g.channels, weight.size(0), groups);
  run_backward(grad_out, x, weight, gx, gw, gb, s,
               []<typename T>(const T* gy, const T* xp, const T* wp, T* gxp, T* gwp, T* gbp,
                              const ConvShape& shape) {
                 conv2d_backward_kernel<T>(gy, xp, wp, gxp, gwp, gbp, shape);
               });
}

Tensor Kernels::conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Window2d& g, int64_t groups) const {
  const ConvShape s = conv_shape(g, x.size(1), g.channels, groups);
  return run_forward(
      x, weight, bias, s, g.height, g.width,
      []<typename T>(const T* xp, const T* wp, const T* bp, T* yp, const ConvShape& shape) {
        conv_transpose2d_forward_kernel<T>(xp, wp, bp, yp, shape);
      });
}

void Kernels::conv_transpose2d_backward(const Tensor& grad_out, const Tensor& x,
                                        const Tensor& weight, const Tensor& gx, const Tensor& gw,
                                        const Tensor& gb, const Window2d& g, int64_t groups) const {
  const ConvShape s = conv_shape(g, x.size(1), g.channels, groups);
  run_backward(grad_out, x, weight, gx, gw, gb, s,
               []<typename T>(const T* gy, const T* xp, const T* wp, T* gxp, T* gwp, T* gbp,
                              const ConvShape& shape) {
                 conv_transpose2d_backward_kernel<T>(gy, xp, wp, gxp, gwp, gbp, shape);
               });
}

// One image at a time (a one-image CPU column buffer has the CUDA layout [C*kh*kw, L]); the
// CPU pads with 0 only (the composed image ops run here only in tests, Note [Separable
// resampling] in nn/unfold.cpp).
void Kernels::im2col(const Tensor& cols, const Tensor& img, const Window2d& w, double pad) const {
  TL_INTERNAL_ASSERT(pad == 0.0);
  const WindowGeometry g = image::geometry_of(w);
  image::dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t one = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      image::im2col<T>(img.data_ptr<T>() + n * one, 1, g, cols.data_ptr<T>() + n * col);
  });
}

void Kernels::col2im(const Tensor& img, const Tensor& cols, const Window2d& w) const {
  const WindowGeometry g = image::geometry_of(w);
  image::dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t one = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      image::col2im<T>(cols.data_ptr<T>() + n * col, 1, g, img.data_ptr<T>() + n * one);
  });
}

}  // namespace tl::cpu
