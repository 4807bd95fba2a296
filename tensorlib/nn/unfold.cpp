#include "tensorlib/nn/unfold.h"

#include <algorithm>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/nn/image_util.h"

namespace tl::nn::detail {

namespace {

// im2col / col2im between contiguous tensors: the kernels of the tensors' backend.
void im2col_any(const Tensor& cols, const Tensor& img, const tl::detail::Window2d& w, double pad) {
  tl::detail::kernels_for(img.device()).im2col(cols, img, w, pad);
}

void col2im_any(const Tensor& img, const Tensor& cols, const tl::detail::Window2d& w) {
  tl::detail::kernels_for(img.device()).col2im(img, cols, w);
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
  autograd::record(
      img, "Fold2d", {&cols}, {},
      [w](const autograd::variable_list& g, const autograd::variable_list&) {
        check_no_double_backward("fold2d");
        const Tensor gi = g[0].contiguous();
        Tensor gc = empty({w.batch, w.channels * w.kh * w.kw, w.out_h * w.out_w}, gi.options());
        im2col_any(gc, gi, w, 0.0);
        return autograd::variable_list{gc};
      });
  return img;
}

// Note [Chunked convolution columns]
// conv2d and conv_transpose2d as composed for CUDA work per chunk of images, keeping each
// chunk's column buffer within kColBudgetBytes (32 MiB, the CPU path's budget) however large
// the batch. Each has its own autograd node that saves only the input and the weight and
// recomputes a chunk's columns in backward, as the CPU kernels and PyTorch's convolutions do:
// composing differentiable unfold/fold and matmul instead would hold the whole batch's columns
// (C*kh*kw*L per image) at once, the memory a profiler user would then see as the
// convolution's.
// * conv2d: columns = im2col(x) [chunk, groups, K, L]; y = W[groups, Co/g, K] @ columns. In
//   backward grad_w += gy @ columns^T, and grad_x = col2im(W^T @ gy).
// * conv_transpose2d is conv2d's input gradient run forward: columns = W^T[groups, K, Ci/g] @ x
//   (K = Co/g*kh*kw, L = the input's positions), y = col2im(columns) onto the output image
//   whose windows sit at those positions. In backward the columns are im2col(gy):
//   grad_x = W @ columns and grad_w += x @ columns^T.
namespace {

// The images [n0, n0 + cnt) of `win` (its batch), cnt at a time.
struct Chunks {
  tl::detail::Window2d win;
  int64_t per_chunk;

  Chunks(const tl::detail::Window2d& w, int64_t column_rows, ScalarType dtype, int64_t budget)
      : win(w),
        per_chunk(tl::detail::images_per_chunk(
            w.batch, column_rows * w.out_h * w.out_w * static_cast<int64_t>(element_size(dtype)),
            budget)) {}

  template <typename F>
  void each(F&& f) const {
    for (int64_t n0 = 0; n0 < win.batch; n0 += per_chunk) {
      const int64_t cnt = std::min(per_chunk, win.batch - n0);
      tl::detail::Window2d w = win;
      w.batch = cnt;
      f(n0, cnt, w);
    }
  }
};

// The images [n0, n0 + cnt) of a contiguous [N, ...] tensor (contiguous too).
Tensor images(const Tensor& t, int64_t n0, int64_t cnt) {
  return t.slice(0, n0, n0 + cnt);
}

// im2col of the chunk's images `img` into new [cnt, rows, L] columns.
Tensor columns_of(const Tensor& img, const tl::detail::Window2d& w) {
  Tensor cols = empty({w.batch, w.channels * w.kh * w.kw, w.out_h * w.out_w}, img.options());
  im2col_any(cols, img, w, 0.0);
  return cols;
}

}  // namespace

Tensor conv2d_unfolded(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const tl::detail::Window2d& win, int64_t groups, int64_t col_budget_bytes) {
  const int64_t n = win.batch, c_out = weight.size(0), L = win.out_h * win.out_w;
  const int64_t rows = win.channels * win.kh * win.kw, K = rows / groups, cog = c_out / groups;
  const Chunks chunks(win, rows, input.dtype(), col_budget_bytes);
  Tensor x, wt, out;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    wt = weight.contiguous();
    out = empty({n, c_out, win.out_h, win.out_w}, x.options());
    const Tensor wg = wt.view({groups, cog, K});
    chunks.each([&](int64_t n0, int64_t cnt, const tl::detail::Window2d& w) {
      const Tensor cols = columns_of(images(x, n0, cnt), w).view({cnt, groups, K, L});
      images(out, n0, cnt).view({cnt, groups, cog, L}).copy_(wg.matmul(cols));
    });
    if (bias.defined()) out.add_(bias.view({1, c_out, 1, 1}));
  }
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  autograd::record(
      out, "Convolution", {&input, &weight, &bias}, {x, wt},
      [=](const autograd::variable_list& g, const autograd::variable_list& saved) {
        check_no_double_backward("conv2d");
        const Tensor gy = g[0].contiguous();
        const Tensor& xs = saved[0];
        const Tensor wg = saved[1].view({groups, cog, K});
        Tensor gx =
            need_x ? empty({n, win.channels, win.height, win.width}, gy.options()) : Tensor();
        Tensor gw = need_w ? zeros({groups, cog, K}, gy.options()) : Tensor();
        chunks.each([&](int64_t n0, int64_t cnt, const tl::detail::Window2d& w) {
          const Tensor gyc = images(gy, n0, cnt).view({cnt, groups, cog, L});
          if (need_w) {
            const Tensor cols = columns_of(images(xs, n0, cnt), w).view({cnt, groups, K, L});
            gw.add_(gyc.matmul(cols.transpose(2, 3)).sum({0}));
          }
          if (need_x)
            col2im_any(images(gx, n0, cnt), wg.transpose(1, 2).matmul(gyc).view({cnt, rows, L}), w);
        });
        Tensor gb = need_b ? gy.view({n, c_out, L}).sum({0, 2}) : Tensor();
        return autograd::variable_list{gx, need_w ? gw.view(saved[1].sizes()) : Tensor(), gb};
      });
  return out;
}

Tensor conv_transpose2d_folded(const Tensor& input, const Tensor& weight, const Tensor& bias,
                               const tl::detail::Window2d& win, int64_t groups,
                               int64_t col_budget_bytes) {
  // `win` is the output image's geometry; its windows sit at the input's L positions.
  const int64_t n = win.batch, c_in = input.size(1), c_out = win.channels;
  const int64_t L = win.out_h * win.out_w, rows = c_out * win.kh * win.kw, K = rows / groups;
  const int64_t cig = c_in / groups;
  const Chunks chunks(win, rows, input.dtype(), col_budget_bytes);
  Tensor x, wt, out;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    wt = weight.contiguous();  // [Ci, Co/g, kh, kw] = [groups, Ci/g, K]
    out = empty({n, c_out, win.height, win.width}, x.options());
    const Tensor wgt = wt.view({groups, cig, K}).transpose(1, 2);
    chunks.each([&](int64_t n0, int64_t cnt, const tl::detail::Window2d& w) {
      const Tensor cols = wgt.matmul(images(x, n0, cnt).view({cnt, groups, cig, L}));
      col2im_any(images(out, n0, cnt), cols.view({cnt, rows, L}), w);
    });
    if (bias.defined()) out.add_(bias.view({1, c_out, 1, 1}));
  }
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  autograd::record(
      out, "Convolution", {&input, &weight, &bias}, {x, wt},
      [=](const autograd::variable_list& g, const autograd::variable_list& saved) {
        check_no_double_backward("conv_transpose2d");
        const Tensor gy = g[0].contiguous();
        const Tensor& xs = saved[0];
        const Tensor wg = saved[1].view({groups, cig, K});
        Tensor gx = need_x ? empty({n, c_in, win.out_h, win.out_w}, gy.options()) : Tensor();
        Tensor gw = need_w ? zeros({groups, cig, K}, gy.options()) : Tensor();
        if (need_x || need_w) {
          chunks.each([&](int64_t n0, int64_t cnt, const tl::detail::Window2d& w) {
            const Tensor cols = columns_of(images(gy, n0, cnt), w).view({cnt, groups, K, L});
            if (need_x) images(gx, n0, cnt).view({cnt, groups, cig, L}).copy_(wg.matmul(cols));
            if (need_w) {
              const Tensor xc = images(xs, n0, cnt).view({cnt, groups, cig, L});
              gw.add_(xc.matmul(cols.transpose(2, 3)).sum({0}));
            }
          });
        }
        Tensor gb = need_b ? gy.view({n, c_out, win.height * win.width}).sum({0, 2}) : Tensor();
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
