// The CPU backend's kernel table (core/kernels.h, Note [Device dispatch]); its entries are
// defined in the cpu/ files of their ops.
#pragma once

#include "tensorlib/core/kernels.h"

namespace tl::cpu {

class Kernels final : public detail::Kernels {
 public:
  DeviceType device_type() const override { return kCPU; }
  // elementwise.cpp
  void unary(math::UnaryOp op, const Tensor& out, const Tensor& in) const override;
  void binary(math::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
              const Scalar& alpha) const override;
  void where(const Tensor& out, const Tensor& cond, const Tensor& a,
             const Tensor& b) const override;
  void clamp(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
             const std::optional<Scalar>& hi) const override;
  void masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) const override;
  // copy.cpp
  void copy(const Tensor& dst, const Tensor& src) const override;
  void fill(const Tensor& t, const Scalar& value) const override;
  // indexing.cpp
  void index_select(const Tensor& out, const Tensor& self, int64_t dim,
                    const Tensor& index) const override;
  void gather(const Tensor& out, const Tensor& self, int64_t dim,
              const Tensor& index) const override;
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                   const Tensor& src) const override;
  Tensor flat_nonzero(const Tensor& flags) const override;
  void unravel(const Tensor& out, const Tensor& flat, IntArrayRef sizes) const override;
  // reduce.cpp
  void reduce_rows(detail::ReduceOp op, const Tensor& out, const Tensor& indices,
                   const Tensor& rows, int64_t n_rows, int64_t row_len,
                   int64_t correction) const override;
  Tensor sum_leading(const Tensor& x, const std::vector<bool>& reduced, bool keepdim,
                     ScalarType out_dtype) const override;
  void softmax(const Tensor& out, const Tensor& in, int64_t outer, int64_t len, int64_t inner,
               bool log) const override;
  // optim.cpp
  bool adam_step(const detail::AdamStep& step, const Tensor& p, const Tensor& g, const Tensor& m,
                 const Tensor& v) const override;
  // linalg.cpp
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
              const Scalar& beta, bool use_beta) const override;
  // kernels.cpp
  void random(const Tensor& out, const detail::RandomFill& fill) const override;
  // conv.cpp
  void im2col(const Tensor& cols, const Tensor& img, const detail::Window2d& w,
              double pad) const override;
  void col2im(const Tensor& img, const Tensor& cols, const detail::Window2d& w) const override;
  Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                const detail::Window2d& g, int64_t groups) const override;
  void conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                       const Tensor& gx, const Tensor& gw, const Tensor& gb,
                       const detail::Window2d& g, int64_t groups) const override;
  Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const detail::Window2d& g, int64_t groups) const override;
  void conv_transpose2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                 const Tensor& gx, const Tensor& gw, const Tensor& gb,
                                 const detail::Window2d& g, int64_t groups) const override;
  // pooling.cpp
  Tensor max_pool2d(const Tensor& x, const detail::Window2d& g, Tensor& indices) const override;
  void max_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                           const detail::Window2d& g) const override;
  Tensor avg_pool2d(const Tensor& x, const detail::Window2d& g,
                    const detail::AvgPool2d& a) const override;
  void avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const detail::Window2d& g,
                           const detail::AvgPool2d& a) const override;
  Tensor adaptive_avg_pool2d(const Tensor& x, const detail::Window2d& g) const override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out,
                                    const detail::Window2d& g) const override;
  // upsample.cpp
  Tensor upsample2d(const Tensor& x, const detail::Window2d& g,
                    const detail::Resize2d& r) const override;
  void upsample2d_backward(const Tensor& grad_in, const Tensor& grad_out, const detail::Window2d& g,
                           const detail::Resize2d& r) const override;
};

/// The CPU backend's table.
const detail::Kernels& kernels();

}  // namespace tl::cpu
