// The front-ends of the matrix products: mm, bmm, addmm and matmul with PyTorch's shape rules
// and their gradients. Every product ends in matmul_into(), the backend's matmul (the CPU's in
// cpu/linalg.cpp: OpenBLAS for float32 and float64; the CUDA backend's: cuBLAS).
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"

namespace tl {
namespace {

// out = alpha * a @ b (+ beta * out when use_beta), batched. out is contiguous with sizes
// [batch..., m, n]; a is [batch'..., m, k] and b is [batch'..., k, n] with the same number of
// dims as out, each batch size equal to out's or 1 (broadcast without materialising it).
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                 const Scalar& beta, bool use_beta) {
  const int64_t nd = out.dim();
  TL_INTERNAL_ASSERT(nd >= 2 && a.dim() == nd && b.dim() == nd && out.is_contiguous());
  if (out.numel() == 0) return;
  detail::kernels_for(out.device()).matmul(out, a, b, alpha, beta, use_beta);
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_device(op, {&a, &b});
  TL_CHECK(a.dtype() == b.dtype(), op,
           "(): expected mat1 and mat2 to have the same dtype, but got: ", a.dtype(),
           " != ", b.dtype());
  TL_CHECK(a.dtype() != kBool, op, "(): not implemented for 'bool' tensors");
}

void check_mm_shapes(const Tensor& a, const Tensor& b) {
  TL_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
           a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

void check_matrices(const char* op, const Tensor& a, const Tensor& b) {
  check_operands(op, a, b);
  TL_CHECK(a.dim() == 2, op, "(): self must be a matrix, got a ", a.dim(), "-D tensor of shape ",
           a.sizes());
  TL_CHECK(b.dim() == 2, op, "(): mat2 must be a matrix, got a ", b.dim(), "-D tensor of shape ",
           b.sizes());
  check_mm_shapes(a, b);
}

// Prepends size-1 dims until t has `nd` dims (a view).
Tensor pad_dims(const Tensor& t, int64_t nd) {
  std::vector<int64_t> sizes(nd - t.dim(), 1);
  std::vector<int64_t> strides(nd - t.dim(), 1);
  sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  strides.insert(strides.end(), t.strides().begin(), t.strides().end());
  return t.dim() == nd ? t : t.as_strided(sizes, strides, t.storage_offset());
}

// matmul with at least one operand of 3 or more dims: batch dims broadcast; a 1-D operand is
// a row (left) or column (right) vector whose dim is removed from the result.
Tensor batched_matmul(const Tensor& a, const Tensor& b) {
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(a2.dim() - 2), k = a2.size(a2.dim() - 1);
  const int64_t k2 = b2.size(b2.dim() - 2), n = b2.size(b2.dim() - 1);
  TL_CHECK(k == k2, "matmul(): mat1 and mat2 shapes cannot be multiplied (", m, "x", k, " and ", k2,
           "x", n, "; shapes ", a.sizes(), " and ", b.sizes(), ")");
  const std::vector<int64_t> batch_a(a2.sizes().begin(), a2.sizes().end() - 2);
  const std::vector<int64_t> batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  std::vector<int64_t> batch = broadcast_shapes(batch_a, batch_b);

  std::vector<int64_t> result_sizes = batch;
  if (a.dim() > 1) result_sizes.push_back(m);
  if (b.dim() > 1) result_sizes.push_back(n);
  Tensor result = empty(result_sizes, a.options());
  const int64_t batches = detail::numel_of(batch);

  // A batch of matrices times one matrix is one tall product when a's batch and row dims
  // merge into one without copying (PyTorch folds the same way).
  if (batch_b.empty() && a2.dim() > 2) {
    auto folded = detail::view_strides(a2.sizes(), a2.strides(), {batches * m, k});
    if (folded) {
      matmul_into(result.view({batches * m, n}), a2.view({batches * m, k}), b2, 1, 0, false);
      return result;
    }
  }
  std::vector<int64_t> out_sizes = batch;
  out_sizes.push_back(m);
  out_sizes.push_back(n);
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  matmul_into(result.view(out_sizes), pad_dims(a2, nd), pad_dims(b2, nd), 1, 0, false);
  return result;
}

}  // namespace

Tensor matmul_forward(const Tensor& a, const Tensor& b);

namespace {
using autograd::variable_list;

// The gradients of matmul(a, b) for any of its shape rules: 1-D operands are promoted as in
// forward (a -> [1, k], b -> [k, 1]), batch dims broadcast back with sum_to.
variable_list matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  std::vector<int64_t> batch = broadcast_shapes(IntArrayRef(a2.sizes().data(), a2.dim() - 2),
                                                IntArrayRef(b2.sizes().data(), b2.dim() - 2));
  std::vector<int64_t> full = batch;
  full.push_back(a2.size(-2));
  full.push_back(b2.size(-1));
  Tensor g2 = g.reshape(full);
  // Note [Gradient layout]: as PyTorch's mm backward, an operand stored transposed (a
  // weight used as W.t() by Linear) gets its gradient computed transposed too, so the
  // gradient of W itself comes out contiguous: no copy when it is accumulated into W.grad.
  auto transposed = [](const Tensor& t) {
    return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 &&
           t.stride(1) == t.size(0);
  };
  if (a2.dim() == 2 && b2.dim() == 2) {
    Tensor ga = transposed(a2) ? tl::matmul(b2, g2.t()).t() : tl::matmul(g2, b2.t());
    Tensor gb = transposed(b2) ? tl::matmul(g2.t(), a2).t() : tl::matmul(a2.t(), g2);
    // (1-D operands were promoted: back to their shape; 2-D ones keep their layout.)
    return {a.dim() == 2 ? ga : ga.reshape(a.sizes()), b.dim() == 2 ? gb : gb.reshape(b.sizes())};
  }
  Tensor ga = autograd::sum_to(tl::matmul(g2, b2.transpose(-1, -2)), a2.sizes()).reshape(a.sizes());
  Tensor gb = autograd::sum_to(tl::matmul(a2.transpose(-1, -2), g2), b2.sizes()).reshape(b.sizes());
  return {ga, gb};
}

void record_matmul(const Tensor& out, const char* op, const Tensor& a, const Tensor& b) {
  autograd::record(out, op, {&a, &b}, {a, b}, [](const variable_list& g, const variable_list& s) {
    return matmul_backward(g[0], s[0], s[1]);
  });
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_matrices("mm", a, b);
  Tensor out = empty({a.size(0), b.size(1)}, a.options());
  matmul_into(out, a, b, 1, 0, false);
  record_matmul(out, "Mm", a, b);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_operands("bmm", a, b);
  TL_CHECK(a.dim() == 3, "bmm(): batch1 must be a 3D tensor, got a ", a.dim(), "-D tensor");
  TL_CHECK(b.dim() == 3, "bmm(): batch2 must be a 3D tensor, got a ", b.dim(), "-D tensor");
  TL_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
           "bmm(): Expected size for first two dimensions of batch2 tensor to be: [", a.size(0),
           ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, a.options());
  matmul_into(out, a, b, 1, 0, false);
  record_matmul(out, "Bmm", a, b);
  return out;
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, const Scalar& beta,
             const Scalar& alpha) {
  check_matrices("addmm", m1, m2);
  detail::check_device("addmm", {&input, &m1, &m2});
  TL_CHECK(input.dtype() == m1.dtype(), "addmm(): expected self and mat1 to have the same dtype, ",
           "but got: ", input.dtype(), " != ", m1.dtype());
  Tensor out = empty({m1.size(0), m2.size(1)}, m1.options());
  // beta == 0 ignores input entirely (nan and inf in it do not propagate), as in PyTorch.
  const bool use_beta = beta.to_double() != 0.0;
  if (use_beta) detail::copy(out, input);
  matmul_into(out, m1, m2, alpha, beta, use_beta);
  autograd::record(
      out, "Addmm", {&input, &m1, &m2}, {m1, m2},
      [is = input.sizes().vec(), beta, alpha](const variable_list& g, const variable_list& s) {
        variable_list mg = matmul_backward(g[0], s[0], s[1]);
        return variable_list{autograd::sum_to(g[0] * beta, is), mg[0] * alpha, mg[1] * alpha};
      });
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor out = autograd::forward_no_grad([&] { return matmul_forward(a, b); });
  record_matmul(out, "Matmul", a, b);
  return out;
}

Tensor matmul_forward(const Tensor& a, const Tensor& b) {
  check_operands("matmul", a, b);
  const int64_t da = a.dim(), db = b.dim();
  TL_CHECK(da >= 1 && db >= 1, "both arguments to matmul need to be at least 1D, but they are ", da,
           "D and ", db, "D");
  if (da == 1 && db == 1) {
    TL_CHECK(a.size(0) == b.size(0), "inconsistent tensor size, expected tensor [", a.size(0),
             "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0),
             " and ", b.size(0), " elements respectively");
    Tensor out = empty({}, a.options());
    matmul_into(out.view({1, 1}), a.unsqueeze(0), b.unsqueeze(1), 1, 0, false);
    return out;
  }
  if (da == 2 && db == 1) {
    TL_CHECK(a.size(1) == b.size(0), "size mismatch, got input (", a.size(0), "), mat (", a.size(0),
             "x", a.size(1), "), vec (", b.size(0), ")");
    Tensor out = empty({a.size(0)}, a.options());
    matmul_into(out.view({a.size(0), 1}), a, b.unsqueeze(1), 1, 0, false);
    return out;
  }
  if (da == 1 && db == 2) {
    const Tensor row = a.unsqueeze(0);
    check_mm_shapes(row, b);
    Tensor out = empty({b.size(1)}, a.options());
    matmul_into(out.view({1, b.size(1)}), row, b, 1, 0, false);
    return out;
  }
  if (da == 2 && db == 2) return mm(a, b);
  return batched_matmul(a, b);
}

Tensor Tensor::matmul(const Tensor& other) const {
  return tl::matmul(*this, other);
}
Tensor Tensor::mm(const Tensor& other) const {
  return tl::mm(*this, other);
}
Tensor Tensor::bmm(const Tensor& other) const {
  return tl::bmm(*this, other);
}

}  // namespace tl
