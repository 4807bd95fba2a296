// The op kernels of one backend, as the device-neutral op front-ends (tensorlib/ops/, and the
// few in core/ and nn/) call them: one table per backend.
//
// Note [Device dispatch]
// Each op validates its arguments, promotes types and allocates its result in device-neutral
// code (its front-end), asks `check_device` where its operands live, and then calls that
// device's entry in `kernels_for(device)`. The CPU backend fills its table in tensorlib/cpu/,
// the CUDA backend in tensorlib/cuda/ (which includes the CUDA headers the core never does);
// the front-ends name no device. Adding a backend adds its files and one line in
// core/kernels.cpp's list of backends, and edits no op. Operands on two devices fail as in
// PyTorch ("Expected all tensors to be on the same device ..."); elementwise ops also accept
// 0-dim CPU tensors next to CUDA ones (wrapped numbers, as TensorIterator does), which the
// backend passes as values. On CUDA every entry runs asynchronously on the current stream of
// the operands' device; the result tensors are allocated by the caller on that device and
// have the broadcast shape. An entry a backend does not fill throws naming the op and device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "tensorlib/base/device.h"
#include "tensorlib/core/array_ref.h"
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

/// Average pooling's divisor (torch's count_include_pad and divisor_override).
struct AvgPool2d {
  bool count_include_pad;
  std::optional<int64_t> divisor_override;
};

/// An interpolation: nearest or bilinear, and the scale factors passed on per axis (ATen's
/// `scales`; none: out / in).
struct Resize2d {
  bool bilinear;
  bool align_corners;
  std::optional<double> scale_h, scale_w;
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

/// One Adam/AdamW update of a parameter (Note [Fused Adam] in optim/optimizer.cpp): the
/// optimizer's scalars as PyTorch's single-tensor Adam uses them.
struct AdamStep {
  double beta1, beta2;
  double step_size;         // lr / (1 - beta1^t)
  double bias_correction2;  // sqrt(1 - beta2^t)
  double eps;
  double weight_decay;  // 0: none
  bool decoupled;       // AdamW: p *= 1 - lr * weight_decay first; Adam: g += weight_decay * p
  double lr;
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  /// The backend's device type, for messages.
  virtual DeviceType device_type() const = 0;
  /// dst <- src, same sizes (src already expanded), any dtypes; called on the table of the
  /// device that is not the CPU when one is. On CUDA blocking: returns once the data can be
  /// read (on the host) or used (on the device) (Note [CUDA copies]).
  virtual void copy(const Tensor& dst, const Tensor& src) const;
  /// Every element of t = value (on CUDA, cudaMemsetAsync for zero on a contiguous tensor).
  virtual void fill(const Tensor& t, const Scalar& value) const;
  /// out = op(in); same dtype (floating for the floating-only ops), same shape.
  virtual void unary(math::UnaryOp op, const Tensor& out, const Tensor& in) const;
  /// out = op(a, b); a and b have the common dtype (or are 0-dim CPU scalars of it), out that
  /// dtype or bool for comparisons.
  virtual void binary(math::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                      const Scalar& alpha) const;
  /// out = cond ? a : b (cond bool; a, b of out's dtype).
  virtual void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) const;
  virtual void clamp(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                     const std::optional<Scalar>& hi) const;
  /// self[mask] = value, mask already expanded to self's shape.
  virtual void masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) const;
  /// out = self's slices along dim at the positions in 1-D `index` (out: self's shape with
  /// index.numel() along dim, or 0-dim for a 0-dim self and one index).
  virtual void index_select(const Tensor& out, const Tensor& self, int64_t dim,
                            const Tensor& index) const;
  /// gather's rule over index's shape: out[p] = self[p with index[p] along dim]. An index out
  /// of range stops the kernel (PyTorch's device-side assert): the host does not read indices.
  virtual void gather(const Tensor& out, const Tensor& self, int64_t dim,
                      const Tensor& index) const;
  /// self[p with index[p] along dim] += src[p] over index's shape (atomic adds).
  virtual void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) const;
  /// The linear (row-major) positions of the non-zero elements of a contiguous bool tensor,
  /// int64 1-D. The host reads the count back: a `sync` event of kind data_dependent.
  virtual Tensor flat_nonzero(const Tensor& flags) const;
  /// out[i, :] = the multi-dim index of linear position flat[i] in `sizes` (out int64 [n, nd]).
  virtual void unravel(const Tensor& out, const Tensor& flat, IntArrayRef sizes) const;
  /// cols [batch, channels*kh*kw, out_h*out_w] = the windows of contiguous `img` (pixels in
  /// the padding read as `pad`).
  virtual void im2col(const Tensor& cols, const Tensor& img, const Window2d& w, double pad) const;
  /// The adjoint: img (contiguous) = the sum of every column entry at the pixel it was read from.
  virtual void col2im(const Tensor& img, const Tensor& cols, const Window2d& w) const;
  /// out[i] = op(rows[i, :]) for a contiguous rows buffer; `indices` (int64) receives the
  /// position for max/min/argmax/argmin when defined. `correction` is var/std's.
  virtual void reduce_rows(ReduceOp op, const Tensor& out, const Tensor& indices,
                           const Tensor& rows, int64_t n_rows, int64_t row_len,
                           int64_t correction) const;
  /// Optional: the sum over the leading dims of x (`reduced` marks them) into a new tensor of
  /// out_dtype, without the copy of Note [Reduction layout]; undefined where the backend has no
  /// such path for this layout and dtype (the default), and the caller reduces rows.
  virtual Tensor sum_leading(const Tensor& x, const std::vector<bool>& reduced, bool keepdim,
                             ScalarType out_dtype) const;
  /// Optional: Adam's update of parameter p from its gradient g and its states m and v in one
  /// pass (all contiguous, of one floating dtype, on this device), giving what the composed
  /// update gives element for element; false where the backend has no such path (the default),
  /// and the caller composes the update from ops.
  virtual bool adam_step(const AdamStep& step, const Tensor& p, const Tensor& g, const Tensor& m,
                         const Tensor& v) const;
  /// Softmax or log-softmax of a contiguous input viewed as [outer, len, inner] along len.
  virtual void softmax(const Tensor& out, const Tensor& in, int64_t outer, int64_t len,
                       int64_t inner, bool log) const;
  /// Fills contiguous `out` with the draws of `fill` (uniform and normal: floating dtypes),
  /// element i from counter fill.offset + i / (4, or 2 for integers), as the CPU loops do.
  virtual void random(const Tensor& out, const RandomFill& fill) const;

  // Note [Image kernels]
  // The image ops of tensorlib/nn (conv2d, conv_transpose2d, max, average and adaptive
  // pooling, interpolate). Each forward entry is optional: it returns a new contiguous result,
  // or an undefined tensor where the backend has no kernel for the op (the default), and the
  // front-end composes the op from unfold/fold, matmul and reductions (nn/unfold.h), whose
  // autograd is the composition's. A backward entry is called only after its forward gave a
  // result; it writes into contiguous gradients the caller allocated. Operands may have any
  // strides. Window2d describes the input: g.batch x g.channels planes of g.height x g.width,
  // windows at g.out_h x g.out_w positions (conv_transpose2d: the output, windows at the
  // input's pixels). Every floating dtype the backend stores may come.

  /// conv2d of x [N, C, H, W] with weight [C_out, C / groups, kh, kw] and bias [C_out] (or
  /// undefined): [N, C_out, out_h, out_w].
  virtual Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Window2d& g, int64_t groups) const;
  /// conv2d's gradients from grad_out; gx, gw, gb each undefined where not needed (overwritten).
  virtual void conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                               const Tensor& gx, const Tensor& gw, const Tensor& gb,
                               const Window2d& g, int64_t groups) const;
  /// conv_transpose2d of x [N, C_in, out_h, out_w] with weight [C_in, C_out / groups, kh, kw]:
  /// [N, C_out, H, W] (g.channels = C_out).
  virtual Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  const Window2d& g, int64_t groups) const;
  virtual void conv_transpose2d_backward(const Tensor& grad_out, const Tensor& x,
                                         const Tensor& weight, const Tensor& gx, const Tensor& gw,
                                         const Tensor& gb, const Window2d& g, int64_t groups) const;
  /// The maximum of each window (padding counts as -inf; the first maximum in scan order, a NaN
  /// counts as one) and, in `indices` (int64, set here), its position h * W + w in its plane.
  virtual Tensor max_pool2d(const Tensor& x, const Window2d& g, Tensor& indices) const;
  /// grad_in = 0, then each grad_out element added at its index.
  virtual void max_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out,
                                   const Tensor& indices, const Window2d& g) const;
  /// The mean of each window (dilation 1) clipped to the input, divided as `a` says (the
  /// window's span in the padded input: avg_span in core/image_windows.h).
  virtual Tensor avg_pool2d(const Tensor& x, const Window2d& g, const AvgPool2d& a) const;
  virtual void avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Window2d& g,
                                   const AvgPool2d& a) const;
  /// The mean over adaptive_start..adaptive_end along each axis (the kernel fields unused).
  virtual Tensor adaptive_avg_pool2d(const Tensor& x, const Window2d& g) const;
  virtual void adaptive_avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out,
                                            const Window2d& g) const;
  /// interpolate to out_h x out_w (the kernel fields unused), with the indices and taps of
  /// core/image_windows.h.
  virtual Tensor upsample2d(const Tensor& x, const Window2d& g, const Resize2d& r) const;
  virtual void upsample2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Window2d& g,
                                   const Resize2d& r) const;

  /// out[b] = alpha * a[b] @ b[b] + beta * out[b] (out not read when !use_beta) over the
  /// leading batch dims (a and b broadcast by stride 0); float32 and float64 through cuBLAS.
  virtual void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                      const Scalar& beta, bool use_beta) const;

 protected:
  /// Throws: `op` has no kernel on this backend's device.
  [[noreturn]] void missing(const char* op) const;
};

/// The kernel table of `device`'s backend. Throws when this build has no backend for it.
const Kernels& kernels_for(Device device);
/// Whether this build has a backend for `type`.
bool has_kernels(DeviceType type);

/// Refuses to write through a tensor whose elements alias each other (an expanded tensor), as
/// PyTorch does: the result would depend on the order of the writes.
void check_no_internal_overlap(const char* op, const Tensor& t);

/// Where an op runs: the device of its operands (Note [Device dispatch]). Throws when they
/// are on different devices, or on CUDA in a build without the backend. With
/// `allow_cpu_scalars`, 0-dim CPU tensors may join CUDA ones.
Device check_device(const char* op, std::initializer_list<const Tensor*> tensors,
                    bool allow_cpu_scalars = false);

}  // namespace detail
}  // namespace tl
