#include "tensorlib/nn/unfold.h"

#include <algorithm>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/nn/im2col.h"
#include "tensorlib/nn/image_util.h"

namespace tl::nn::detail {

namespace {

// im2col / col2im between contiguous tensors: the CUDA kernels, or on the CPU (where the
// composed ops run only in tests, Note [Separable resampling]) the CPU's, one image at a time
// (a one-image CPU column buffer has the CUDA layout [C*kh*kw, L]); the CPU pads with 0 only.
WindowGeometry geometry_of(const tl::detail::Window2d& w) {
  return {w.channels, w.height, w.width, w.kh, w.kw, w.sh, w.sw,
          w.ph,       w.pw,     w.dh,    w.dw, w.out_h, w.out_w};
}

void im2col_any(const Tensor& cols, const Tensor& img, const tl::detail::Window2d& w, double pad) {
  if (img.is_cuda()) return tl::detail::cuda_kernels()->im2col(cols, img, w, pad);
  TL_INTERNAL_ASSERT(pad == 0.0);
  const WindowGeometry g = geometry_of(w);
  dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t image = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      im2col<T>(img.data_ptr<T>() + n * image, 1, g, cols.data_ptr<T>() + n * col);
  });
}

void col2im_any(const Tensor& img, const Tensor& cols, const tl::detail::Window2d& w) {
  if (img.is_cuda()) return tl::detail::cuda_kernels()->col2im(img, cols, w);
  const WindowGeometry g = geometry_of(w);
  dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t image = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      col2im<T>(cols.data_ptr<T>() + n * col, 1, g, img.data_ptr<T>() + n * image);
  });
}

}  // namespace

Tensor unfold2d(const Tensor& input, const tl::detail::Window2d& w, double pad) {
  TL_INTERNAL_ASSERT(input.dim() == 4);
  Tensor cols;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous();
    cols = empty({w.batch, w.channels * w.kh * w.kw, w.out_h * w.out_w}, x.options());
    im2col_any(cols, x, w, pad);
  }
  autograd::record(cols, "Unfold2d", {&input}, {},
                   [w](const autograd::variable_list& g, const autograd::variable_list&) {
                     check_no_double_backward("unfold2d");
                     const Tensor gc = g[0].contiguous();
                     Tensor gi = empty({w.batch, w.channels, w.height, w.width}, gc.options());
                     col2im_any(gi, gc, w);
                     return autograd::variable_list{gi};
                   });
  return cols;
}

Tensor fold2d(const Tensor& cols, const tl::detail::Window2d& w) {
  TL_INTERNAL_ASSERT(cols.dim() == 3);
  Tensor img;
  {
    NoGradGuard no_grad;
    const Tensor c = cols.contiguous();
    img = empty({w.batch, w.channels, w.height, w.width}, c.options());
    col2im_any(img, c, w);
  }
  autograd::record(img, "Fold2d", {&cols}, {},
                   [w](const autograd::variable_list& g, const autograd::variable_list&) {
                     check_no_double_backward("fold2d");
                     const Tensor gi = g[0].contiguous();
                     Tensor gc = empty({w.batch, w.channels * w.kh * w.kw, w.out_h * w.out_w},
                                       gi.options());
                     im2col_any(gc, gi, w, 0.0);
                     return autograd::variable_list{gc};
                   });
  return img;
}

// Note [Separable resampling]
// Average pooling (every padding and divisor mode), adaptive average pooling and nearest and
// bilinear upsampling all weigh an output pixel's inputs by a product of a row weight and a
// column weight: the window (or the interpolation taps) is a rectangle and its divisor a
// product of per-axis counts. On CUDA they are therefore two matrix products per plane,
// rows[out_h, H] @ P @ cols[out_w, W]^T, with the per-axis weights built on the host by the
// very functions the CPU kernels use (so the CPU tests check the geometry the GPU runs) and
// uploaded (a host-to-device copy of out_h*H + out_w*W numbers, no sync). Autograd
// differentiates the products, so the backward is rows^T @ G @ cols: deterministic, no atomics,
// no kernel of its own and no added nvcc time. The price is arithmetic: O(out_h*H*W +
// out_h*W*out_w) multiply-adds per plane instead of O(out_h*out_w*taps), negligible for the
// small feature maps these ops see in tensorlib's models, wasteful for large images (a direct
// kernel per op is the follow-up if a profile asks for it).
Tensor resample2d(const Tensor& input, const AxisWeights& rows, const AxisWeights& cols) {
  TL_INTERNAL_ASSERT(input.dim() == 4 && rows.in == input.size(2) && cols.in == input.size(3));
  auto upload = [&](const AxisWeights& a) {
    Tensor host = empty({a.out, a.in}, TensorOptions(kFloat64));
    std::copy(a.w.begin(), a.w.end(), host.data_ptr<double>());
    return host.to(input.dtype()).to(input.device());
  };
  const Tensor r = upload(rows), c = upload(cols);
  return r.matmul(input).matmul(c.t());
}

}  // namespace tl::nn::detail
