// The CPU backend's matrix product (the front-ends mm, bmm, addmm and matmul: ops/linalg.cpp).
//
// out[b] = alpha * a[b] @ b[b] (+ beta * out[b]) over a (possibly empty) set of batch dims, where
// out is freshly allocated and contiguous and a, b are strided views whose size-1 batch dims
// broadcast. float32 and float64 go to OpenBLAS one gemm per batch, handing it each operand's
// layout as is: a row-major matrix, or a transposed view of one (strides [1, ld]), needs no copy;
// only operands whose inner strides BLAS cannot express (a step along both dims, a zero stride)
// are made contiguous first. BLAS writes straight into the output. Other dtypes (integers,
// float16, bfloat16) take a plain loop that accumulates in acc_t<T>.
#include <cblas.h>

#include <climits>
#include <vector>

#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {
namespace {

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

}  // namespace

void Kernels::matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in, const Scalar& alpha,
                     const Scalar& beta, bool use_beta) const {
  Tensor a = a_in, b = b_in;
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
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

}  // namespace tl::cpu
