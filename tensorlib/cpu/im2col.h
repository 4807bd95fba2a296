// The building blocks of the CPU's image kernels (internal to tensorlib/cpu): im2col and its
// adjoint col2im, the channel-major relayout around them, a BLAS gemm, and the split of
// planes over the OpenMP threads.
//
// Note [Convolution as one GEMM per group]
// A convolution over a chunk of `nb` images becomes one matrix product per group:
//   col  [C*kH*kW, nb*L]   im2col of the chunk (L = H_out*W_out kernel positions per image)
//   out' [C_out,   nb*L]   = weight [C_out, C*kH*kW] @ col
// and out' is the output in channel-major order ([C_out, N, H_out, W_out]), copied into NCHW
// with the bias added on the way. The backward passes are the same products transposed
// (grad_weight = grad_out' @ col^T, grad_col = weight^T @ grad_out', then col2im). Folding the
// images of a chunk into one wide product keeps BLAS at its efficient sizes (a 14x14 image has
// only 196 kernel positions) and lets OpenBLAS thread the product; the memory-bound
// relayouts (im2col, col2im, channel-major copies) are split over images and channels with
// OpenMP. Chunks bound the col buffer (kColBudgetBytes, core/image_windows.h) for large images
// and batches.
#pragma once

#include <cstdint>

#include "tensorlib/core/dtype.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tl::cpu::image {

// Below this many elements of work a relayout stays on the calling thread.
inline constexpr int64_t kParallelMinWork = 16384;

// Calls f(i) for i in [0, n), split over the OpenMP threads when total_work (elements
// touched) is large enough. f(i) must only write what item i owns.
template <typename F>
void parallel_items(int64_t n, int64_t total_work, F&& f) {
#ifdef _OPENMP
  if (n > 1 && total_work >= kParallelMinWork && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) f(i);
}

// How a kernel window walks an image: channels x height x width per image, window kH x kW
// with stride, padding and dilation, placed at out_h x out_w positions.
struct WindowGeometry {
  int64_t channels, height, width;
  int64_t kh, kw;
  int64_t sh, sw;
  int64_t ph, pw;
  int64_t dh, dw;
  int64_t out_h, out_w;
  int64_t rows() const { return channels * kh * kw; }
  int64_t positions() const { return out_h * out_w; }
};

// The pooling and resampling kernels' view of a Window2d: N * C independent [H, W] planes in,
// [out_h, out_w] planes out.
struct PlaneShape {
  int64_t planes, in_h, in_w, out_h, out_w;
};

inline PlaneShape planes_of(const tl::detail::Window2d& g) {
  return {g.batch * g.channels, g.height, g.width, g.out_h, g.out_w};
}

// The geometry of one image of a Window2d.
inline WindowGeometry geometry_of(const tl::detail::Window2d& w) {
  return {w.channels, w.height, w.width, w.kh, w.kw,    w.sh,   w.sw,
          w.ph,       w.pw,     w.dh,    w.dw, w.out_h, w.out_w};
}

// Calls f.template operator()<T>() with T = float or double: the image kernels' own loops run
// in these two (float16 and bfloat16 through float, Note [Reduced-precision image kernels]
// below).
template <typename F>
void dispatch_floating(ScalarType dt, F&& f) {
  if (dt == kFloat32) {
    f.template operator()<float>();
  } else {
    f.template operator()<double>();
  }
}

// Note [Reduced-precision image kernels]
// float16 and bfloat16 images run the float kernels: the operands are converted to float32,
// the result is computed there and rounded once to the input's dtype, as ATen's CPU kernels
// compute these dtypes in float ("opmath") and round the result. The float copies are
// transient tensors of the op (they show in a trace as the op's scratch memory); the results
// and the gradients have the input's dtype.
inline bool is_reduced(ScalarType t) {
  return t == kFloat16 || t == kBFloat16;
}
// A float32 copy of an operand (undefined stays undefined).
inline Tensor to_float(const Tensor& t) {
  return t.defined() ? t.to(kFloat32) : t;
}
// A float32 buffer for a gradient of the op's dtype (undefined: not needed, stays undefined),
// then the gradient rounded once from it.
inline Tensor float_buffer_for(const Tensor& grad) {
  return grad.defined() ? empty(grad.sizes(), kFloat32) : grad;
}
inline void round_into(const Tensor& grad, const Tensor& buffer) {
  if (grad.defined()) Tensor(grad).copy_(buffer);
}

// col[(c*kH + i)*kW + j][n*L + oh*out_w + ow] = img[n][c][oh*sh - ph + i*dh][ow*sw - pw + j*dw]
// (0 where that falls in the padding) for the `batch` contiguous images at `img`; col's rows
// are batch*L long.
template <typename T>
void im2col(const T* img, int64_t batch, const WindowGeometry& g, T* col);

// The adjoint of im2col: img = 0, then every col entry is added to the pixel it was read from.
template <typename T>
void col2im(const T* col, int64_t batch, const WindowGeometry& g, T* img);

// [batch, channels, spatial] -> [channels, batch*spatial].
template <typename T>
void to_channel_major(const T* src, int64_t batch, int64_t channels, int64_t spatial, T* dst);

// [channels, batch*spatial] -> [batch, channels, spatial], adding bias[c] when bias != null.
template <typename T>
void from_channel_major(const T* src, int64_t batch, int64_t channels, int64_t spatial,
                        const T* bias, T* dst);

// sums[c] (+)= sum of row c of the [channels, len] matrix m (accumulated in double).
template <typename T>
void add_row_sums(const T* m, int64_t channels, int64_t len, T* sums);

// Row-major c[m, n] = alpha * op(a) @ op(b) + beta * c with op = transpose when trans_*;
// lda/ldb/ldc are the row strides of a, b, c as stored.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace tl::cpu::image
