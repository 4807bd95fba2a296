// The op kernels of the CUDA backend, as the core sees them (the sibling of cuda_hooks.h).
//
// Note [Device dispatch]
// Each op validates its arguments, promotes types and allocates its result in device-neutral
// code, then asks `check_device` where its operands live: the CPU runs the CPU loop in place,
// CUDA calls one of the entry points below (implemented in tensorlib/cuda/, which includes the
// CUDA headers the core never does). Operands on two devices fail as in PyTorch ("Expected all
// tensors to be on the same device ..."); elementwise ops also accept 0-dim CPU tensors next to
// CUDA ones (wrapped numbers, as TensorIterator does), which the backend passes as values.
// Every entry point runs asynchronously on the current stream of the operands' device; the
// result tensors are allocated by the caller on that device and have the broadcast shape.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "tensorlib/core/array_ref.h"
#include "tensorlib/core/device.h"
#include "tensorlib/core/elementwise_math.h"
#include "tensorlib/core/scalar.h"

namespace tl {

class Tensor;

namespace detail {

/// Row reductions over a contiguous [n_rows, row_len] buffer (Note [Reduction layout]).
enum class ReduceOp : uint8_t { sum, prod, mean, max, min, argmax, argmin, var, std, logsumexp };

/// A kernel window over [batch, channels, height, width] images (stride, padding, dilation),
/// placed at out_h x out_w positions: the geometry of unfold (im2col) and fold (col2im).
struct Window2d {
  int64_t batch, channels, height, width;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t out_h, out_w;
};

/// The random factories' distributions (Note [Counter-based random tensors], core/philox.h).
enum class RandomDist : uint8_t { uniform, normal, integer };

/// One random fill: Philox key `seed`, first counter `offset`; `low` and `range` for integers.
struct RandomFill {
  RandomDist dist;
  uint64_t seed, offset;
  int64_t low = 0;
  uint64_t range = 1;
};

class CudaKernels {
 public:
  virtual ~CudaKernels() = default;
  /// out = op(in); same dtype (floating for the floating-only ops), same shape.
  virtual void unary(math::UnaryOp op, const Tensor& out, const Tensor& in) const = 0;
  /// out = op(a, b); a and b have the common dtype (or are 0-dim CPU scalars of it), out that
  /// dtype or bool for comparisons.
  virtual void binary(math::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                      const Scalar& alpha) const = 0;
  /// out = cond ? a : b (cond bool; a, b of out's dtype).
  virtual void where(const Tensor& out, const Tensor& cond, const Tensor& a,
                     const Tensor& b) const = 0;
  virtual void clamp(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                     const std::optional<Scalar>& hi) const = 0;
  /// self[mask] = value, mask already expanded to self's shape.
  virtual void masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) const = 0;
  /// gather's rule over index's shape: out[p] = self[p with index[p] along dim]. An index out
  /// of range stops the kernel (PyTorch's device-side assert): the host does not read indices.
  virtual void gather(const Tensor& out, const Tensor& self, int64_t dim,
                      const Tensor& index) const = 0;
  /// self[p with index[p] along dim] += src[p] over index's shape (atomic adds).
  virtual void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) const = 0;
  /// The linear (row-major) positions of the non-zero elements of a contiguous bool tensor,
  /// int64 1-D. The host reads the count back: a `sync` event of kind data_dependent.
  virtual Tensor flat_nonzero(const Tensor& flags) const = 0;
  /// out[i, :] = the multi-dim index of linear position flat[i] in `sizes` (out int64 [n, nd]).
  virtual void unravel(const Tensor& out, const Tensor& flat, IntArrayRef sizes) const = 0;
  /// cols [batch, channels*kh*kw, out_h*out_w] = the windows of contiguous `img` (pixels in
  /// the padding read as `pad`).
  virtual void im2col(const Tensor& cols, const Tensor& img, const Window2d& w,
                      double pad) const = 0;
  /// The adjoint: img (contiguous) = the sum of every column entry at the pixel it was read from.
  virtual void col2im(const Tensor& img, const Tensor& cols, const Window2d& w) const = 0;
  /// out[i] = op(rows[i, :]) for a contiguous rows buffer; `indices` (int64) receives the
  /// position for max/min/argmax/argmin when defined. `correction` is var/std's.
  virtual void reduce_rows(ReduceOp op, const Tensor& out, const Tensor& indices,
                           const Tensor& rows, int64_t n_rows, int64_t row_len,
                           int64_t correction) const = 0;
  /// Softmax or log-softmax of a contiguous input viewed as [outer, len, inner] along len.
  virtual void softmax(const Tensor& out, const Tensor& in, int64_t outer, int64_t len,
                       int64_t inner, bool log) const = 0;
  /// Fills contiguous `out` with the draws of `fill` (uniform and normal: floating dtypes),
  /// element i from counter fill.offset + i / (4, or 2 for integers), as the CPU loops do.
  virtual void random(const Tensor& out, const RandomFill& fill) const = 0;
  /// out[b] = alpha * a[b] @ b[b] + beta * out[b] (out not read when !use_beta) over the
  /// leading batch dims (a and b broadcast by stride 0); float32 and float64 through cuBLAS.
  virtual void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                      const Scalar& beta, bool use_beta) const = 0;
};

/// The CUDA op kernels, or nullptr in a build without the backend.
const CudaKernels* cuda_kernels();

/// Where an op runs: the device of its operands (Note [Device dispatch]). Throws when they
/// are on different devices, or on CUDA in a build without the backend. With
/// `allow_cpu_scalars`, 0-dim CPU tensors may join CUDA ones.
Device check_device(const char* op, std::initializer_list<const Tensor*> tensors,
                    bool allow_cpu_scalars = false);

}  // namespace detail
}  // namespace tl
