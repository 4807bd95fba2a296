// CPU matrix products: mm, bmm, addmm and matmul with PyTorch's shape rules.
//
// Every product ends in matmul_into(): out[b] = alpha * a[b] @ b[b] (+ beta * out[b]) over a
// (possibly empty) set of batch dims, where out is freshly allocated and contiguous and a, b
// are strided views whose size-1 batch dims broadcast. float32 and float64 go to OpenBLAS one
// gemm per batch, handing it each operand's layout as is: a row-major matrix, or a transposed
// view of one (strides [1, ld]), needs no copy; only operands whose inner strides BLAS cannot
// express (a step along both dims, a zero stride) are made contiguous first. BLAS writes
// straight into the output. Other dtypes (integers, float16, bfloat16) take a plain loop that
// accumulates in acc_t<T>.
#include <cblas.h>

#include <climits>
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/core/cuda_kernels.h"
#include "tensorlib/core/error.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {
namespace {

using cpu::convert;

// How BLAS (row-major interface) addresses one rows x cols operand with element strides
// (rs, cs): as stored (ld = rs) or as the transpose of a row-major cols x rows matrix
// (ld = cs). Strides of size-1 dims never matter and are ignored.
struct BlasLayout {
  bool ok = false;
  bool transposed = false;
  int64_t ld = 0;
};

BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const bool fits = rs <= INT_MAX && cs <= INT_MAX;
  if (fits && (cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    return {true, false, rows == 1 ? std::max<int64_t>(1, cols) : rs};
  }
  if (fits && (rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    return {true, true, cols == 1 ? std::max<int64_t>(1, rows) : cs};
  }
  return {};
}

// One matrix of a product: element pointer and element strides.
template <typename T>
struct MatRef {
  const T* data;
  int64_t rs;
  int64_t cs;
};

// c[m, n] (row stride ldc) = alpha * a @ b + beta * c; c is not read when !use_beta.
template <typename T>
void gemm_loop(int64_t m, int64_t n, int64_t k, MatRef<T> a, MatRef<T> b, T* c, int64_t ldc,
               acc_t<T> alpha, acc_t<T> beta, bool use_beta, std::vector<acc_t<T>>& row) {
  using A = acc_t<T>;
  row.resize(n);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), A(0));
    for (int64_t p = 0; p < k; ++p) {
      const A av = convert<A>(a.data[i * a.rs + p * a.cs]);
      const T* brow = b.data + p * b.rs;
      for (int64_t j = 0; j < n; ++j) row[j] += av * convert<A>(brow[j * b.cs]);
    }
    T* crow = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      A v = alpha * row[j];
      if (use_beta) v += beta * convert<A>(crow[j]);
      crow[j] = convert<T>(v);
    }
  }
}

template <typename T>
void gemm_blas(int64_t m, int64_t n, int64_t k, MatRef<T> a, MatRef<T> b, T* c, int64_t ldc,
               T alpha, T beta) {
  const BlasLayout la = blas_layout(m, k, a.rs, a.cs);
  const BlasLayout lb = blas_layout(k, n, b.rs, b.cs);
  TL_INTERNAL_ASSERT(la.ok && lb.ok, "operands must be made BLAS-compatible first");
  const auto ta = la.transposed ? CblasTrans : CblasNoTrans;
  const auto tb = lb.transposed ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a.data,
                blasint(la.ld), b.data, blasint(lb.ld), beta, c, blasint(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a.data,
                blasint(la.ld), b.data, blasint(lb.ld), beta, c, blasint(ldc));
  }
}

// out = alpha * a @ b (+ beta * out when use_beta), batched. out is contiguous with sizes
// [batch..., m, n]; a is [batch'..., m, k] and b is [batch'..., k, n] with the same number of
// dims as out, each batch size equal to out's or 1 (broadcast without materialising it).
void matmul_into(const Tensor& out, Tensor a, Tensor b, const Scalar& alpha, const Scalar& beta,
                 bool use_beta) {
  const int64_t nd = out.dim();
  TL_INTERNAL_ASSERT(nd >= 2 && a.dim() == nd && b.dim() == nd && out.is_contiguous());
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  if (out.numel() == 0) return;
  if (out.is_cuda()) {  // cuBLAS (tensorlib/cuda/blas.cpp)
    detail::cuda_kernels()->matmul(out, a, b, alpha, beta, use_beta);
    return;
  }
  const bool blas = out.dtype() == kFloat32 || out.dtype() == kFloat64;
  if (blas) {
    TL_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "matmul: matrix sizes ", m, "x", k,
             " and ", k, "x", n, " exceed what BLAS can address");
    if (!blas_layout(m, k, a.stride(nd - 2), a.stride(nd - 1)).ok) a = a.contiguous();
    if (!blas_layout(k, n, b.stride(nd - 2), b.stride(nd - 1)).ok) b = b.contiguous();
  }
  // Batch iteration: an odometer over out's batch dims; a broadcast dim advances by 0.
  const int64_t nb = nd - 2;
  std::vector<int64_t> a_step(nb), b_step(nb), idx(nb, 0);
  int64_t batches = 1;
  for (int64_t d = 0; d < nb; ++d) {
    a_step[d] = a.size(d) == 1 ? 0 : a.stride(d);
    b_step[d] = b.size(d) == 1 ? 0 : b.stride(d);
    batches *= out.size(d);
  }
  TL_DISPATCH_ALL(out.dtype(), "matmul", [&]<typename T>() {
    using A = acc_t<T>;
    const T* ap = a.data_ptr<T>();
    const T* bp = b.data_ptr<T>();
    T* cp = out.data_ptr<T>();
    std::vector<A> row;
    for (int64_t batch = 0; batch < batches; ++batch) {
      T* c = cp + batch * m * n;
      if (k == 0) {  // an empty sum: beta * out, or zeros
        for (int64_t i = 0; i < m * n; ++i)
          c[i] = use_beta ? convert<T>(beta.to<A>() * convert<A>(c[i])) : T(0);
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm_blas<T>(m, n, k, {ap, a.stride(nd - 2), a.stride(nd - 1)},
                     {bp, b.stride(nd - 2), b.stride(nd - 1)}, c, n, alpha.to<T>(),
                     use_beta ? beta.to<T>() : T(0));
      } else {
        gemm_loop<T>(m, n, k, {ap, a.stride(nd - 2), a.stride(nd - 1)},
                     {bp, b.stride(nd - 2), b.stride(nd - 1)}, c, n, alpha.to<A>(), beta.to<A>(),
                     use_beta, row);
      }
      for (int64_t d = nb - 1; d >= 0; --d) {
        if (++idx[d] < out.size(d)) {
          ap += a_step[d];
          bp += b_step[d];
          break;
        }
        ap -= a_step[d] * (out.size(d) - 1);
        bp -= b_step[d] * (out.size(d) - 1);
        idx[d] = 0;
      }
    }
  });
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
  if (use_beta) {
    NoGradGuard no_grad;
    out.copy_(input.expand(out.sizes()));
  }
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
