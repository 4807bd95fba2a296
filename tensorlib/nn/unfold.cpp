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

// Note [Chunked convolution columns]
// conv2d as composed for CUDA: per chunk of images, im2col into a column buffer and one batched
// product per group, [groups, Co/g, K] @ [chunk, groups, K, L]. Chunks keep the buffer within
// kColBudgetBytes (32 MiB, the CPU path's budget) however large the batch. Its own autograd node
// saves only the input and the weight and recomputes each chunk's columns in backward (grad_w
// += gy_chunk @ cols^T, grad_cols = W^T @ gy_chunk folded back by col2im), as the CPU kernels
// and PyTorch's convolutions do: composing differentiable unfold + matmul instead would keep
// every chunk's columns alive from forward to backward (C*kh*kw*L per image), the memory a
// profiler user would then see as the convolution's.
Tensor conv2d_unfolded(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const tl::detail::Window2d& win, int64_t groups, int64_t col_budget_bytes) {
  const int64_t n = win.batch, c_out = weight.size(0), L = win.out_h * win.out_w;
  const int64_t rows = win.channels * win.kh * win.kw, K = rows / groups;
  const int64_t nb = images_per_chunk(n, rows * L * static_cast<int64_t>(element_size(input.dtype())),
                                      col_budget_bytes);
  const int64_t image = win.channels * win.height * win.width;
  // The window of images [n0, n0 + cnt), and their columns.
  auto chunk_window = [win](int64_t cnt) {
    tl::detail::Window2d w = win;
    w.batch = cnt;
    return w;
  };
  auto columns = [=](const Tensor& x, int64_t n0, int64_t cnt) {
    Tensor cols = empty({cnt, rows, L}, x.options());
    im2col_any(cols, x.view({-1}).slice(0, n0 * image, (n0 + cnt) * image).view(
                         {cnt, win.channels, win.height, win.width}),
               chunk_window(cnt), 0.0);
    return cols.view({cnt, groups, K, L});
  };
  Tensor x, wt, out;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    wt = weight.contiguous();
    out = empty({n, c_out, win.out_h, win.out_w}, x.options());
    const Tensor wg = wt.view({groups, c_out / groups, K});
    for (int64_t n0 = 0; n0 < n; n0 += nb) {
      const int64_t cnt = std::min(nb, n - n0);
      out.slice(0, n0, n0 + cnt).view({cnt, groups, c_out / groups, L}).copy_(
          wg.matmul(columns(x, n0, cnt)));
    }
    if (bias.defined()) out.add_(bias.view({1, c_out, 1, 1}));
  }
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  autograd::record(
      out, "Convolution", {&input, &weight, &bias}, {x, wt},
      [=](const autograd::variable_list& g, const autograd::variable_list& saved) {
        check_no_double_backward("conv2d");
        const Tensor gy = g[0].contiguous().view({n, groups, c_out / groups, L});
        const Tensor& xs = saved[0];
        const Tensor wg = saved[1].view({groups, c_out / groups, K});
        Tensor gx = need_x ? empty({n, win.channels, win.height, win.width}, gy.options()) : Tensor();
        Tensor gw = need_w ? zeros({groups, c_out / groups, K}, gy.options()) : Tensor();
        for (int64_t n0 = 0; n0 < n; n0 += nb) {
          const int64_t cnt = std::min(nb, n - n0);
          const Tensor gyc = gy.slice(0, n0, n0 + cnt);
          if (need_w) gw.add_(gyc.matmul(columns(xs, n0, cnt).transpose(2, 3)).sum({0}));
          if (need_x) {
            const Tensor gcols = wg.transpose(1, 2).matmul(gyc).view({cnt, rows, L});
            col2im_any(gx.view({-1}).slice(0, n0 * image, (n0 + cnt) * image).view(
                           {cnt, win.channels, win.height, win.width}),
                       gcols, chunk_window(cnt));
          }
        }
        Tensor gb = need_b ? gy.view({n, c_out, L}).sum({0, 2}) : Tensor();
        return autograd::variable_list{gx, need_w ? gw.view(saved[1].sizes()) : Tensor(), gb};
      });
  return out;
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
