// Matrix products on CUDA tensors through cuBLAS (the CUDA kernel table's matmul; front-ends in
// ops/linalg.cpp).
//
// Note [cuBLAS layouts]
// cuBLAS is column-major; tensorlib's matrices are row-major views with strides (rs, cs). A
// row-major C = A @ B is the column-major C^T = B^T @ A^T, so the product is issued as
// gemm(n, m, k, B, A) writing C (contiguous rows: ldc = n). An operand whose inner stride is 1
// is read as stored (CUBLAS_OP_N, ld = rs); one whose row stride is 1 (a transposed view, a
// weight used as W.t()) as transposed (CUBLAS_OP_T, ld = cs): no copy for either, as on the
// CPU. Anything else is made contiguous first. Batches go to one cublasGemmStridedBatchedEx
// when each operand's batch dims collapse to one stride (broadcast operands have stride 0);
// otherwise the operand is expanded and made contiguous. float32 computes in float32 (no
// TF32, PyTorch's default for matmul), float16/bfloat16 accumulate in float32, float64 in
// float64. One handle per device and thread, created on first use and never destroyed (as the
// allocators); each call binds it to the device's current stream. cuBLAS allocates its own
// workspace per stream outside the caching allocator. Integer dtypes (which cuBLAS does not
// multiply) take the same operand layouts to a tiled kernel (int_gemm.cu).
#include <cublas_v2.h>

#include <climits>
#include <vector>

#include "tensorlib/core/shape_util.h"
#include "tensorlib/cuda/strided.h"

namespace tl::cuda::detail {
namespace {

const char* cublas_error(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    default:
      return "cuBLAS error";
  }
}

void check_cublas(cublasStatus_t s, const char* what, int device) {
  TL_CHECK(s == CUBLAS_STATUS_SUCCESS, "matmul: ", what, " failed on cuda:", device, ": ",
           cublas_error(s));
}

// A handle is not safe to use from two threads at once, so each thread gets its own per device
// (as PyTorch's handle pool gives each thread one); they live as long as the process.
cublasHandle_t handle_for(int device) {
  thread_local std::vector<cublasHandle_t> handles;
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr)
    check_cublas(cublasCreate(&handles[device]), "cublasCreate", device);
  return handles[device];
}

// One operand of the batched product: pointer, op, leading dim, batch stride (elements).
struct Operand {
  Tensor keep;  // holds a contiguous copy alive when one was made
  const void* data = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// The single stride of batch dims [0, nb) of t when they collapse to one (size-1 dims ignored),
// or -1.
int64_t collapsed_batch_stride(const Tensor& t, int64_t nb, IntArrayRef batch) {
  int64_t stride = -1, expected = -1;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    const int64_t s = t.size(d) == 1 ? 0 : t.stride(d);
    if (stride < 0) {
      stride = s;
      expected = s * batch[d];
      continue;
    }
    if (s != expected) return -1;
    expected = s * batch[d];
  }
  return stride < 0 ? 0 : stride;
}

Operand operand_of(Tensor t, int64_t nb, IntArrayRef batch, int64_t rows, int64_t cols) {
  auto layout = [&](const Tensor& x, Operand& o) {
    const int64_t rs = x.stride(nb), cs = x.stride(nb + 1);
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols)) &&
        rs <= INT_MAX) {
      o.op = CUBLAS_OP_N;
      o.ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
      return true;
    }
    if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows)) &&
        cs <= INT_MAX) {
      o.op = CUBLAS_OP_T;
      o.ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
      return true;
    }
    return false;
  };
  Operand o;
  int64_t bs = collapsed_batch_stride(t, nb, batch);
  if (bs < 0 || !layout(t, o)) {
    std::vector<int64_t> full(batch.begin(), batch.end());
    full.push_back(rows);
    full.push_back(cols);
    t = t.expand(full).contiguous();
    bs = rows * cols;
    TL_INTERNAL_ASSERT(layout(t, o));
  }
  o.keep = t;
  o.data = t.data_ptr();
  o.batch_stride = bs;
  return o;
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
            const Scalar& beta, bool use_beta) {
  TL_CHECK(out.dtype() != kBool, "matmul: CUDA tensors of dtype bool are not supported");
  const int64_t nd = out.dim();
  TL_INTERNAL_ASSERT(out.is_contiguous() && nd >= 2 && a.dim() == nd && b.dim() == nd);
  const int64_t nb = nd - 2;
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  const std::vector<int64_t> batch(out.sizes().begin(), out.sizes().end() - 2);
  const int64_t batches = tl::detail::numel_of(batch);
  if (out.numel() == 0) return;
  Launch l("matmul", out.device());
  const int device = out.device().resolved().index();
  if (k == 0) {  // an empty inner dim: C = beta * C, or zeros
    if (use_beta) {
      const_cast<Tensor&>(out).mul_(beta);
    } else {
      const_cast<Tensor&>(out).zero_();
    }
    return;
  }
  TL_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && batches <= INT_MAX,
           "matmul: sizes beyond cuBLAS's 32-bit limits (", m, "x", k, " @ ", k, "x", n, ", ",
           batches, " batches)");
  const Operand A = operand_of(a, nb, batch, m, k);
  const Operand B = operand_of(b, nb, batch, k, n);
  if (!is_floating_point(out.dtype())) {  // the tiled integer kernel (int_gemm.cu)
    auto rs = [](const Operand& o) { return o.op == CUBLAS_OP_N ? o.ld : int64_t{1}; };
    auto cs = [](const Operand& o) { return o.op == CUBLAS_OP_N ? int64_t{1} : o.ld; };
    const kernels::IntGemm g{A.data,
                             B.data,
                             out.data_ptr(),
                             m,
                             n,
                             k,
                             batches,
                             rs(A),
                             cs(A),
                             A.batch_stride,
                             rs(B),
                             cs(B),
                             B.batch_stride,
                             alpha.to<int64_t>(),
                             use_beta ? beta.to<int64_t>() : 0,
                             use_beta};
    l.check(kernels::launch_int_gemm(g, out.dtype(), l.stream()));
    return;
  }
  cublasHandle_t h = handle_for(device);
  check_cublas(cublasSetStream(h, l.stream()), "cublasSetStream", device);

  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  const double al = alpha.to<double>(), be = use_beta ? beta.to<double>() : 0.0;
  const float alf = static_cast<float>(al), bef = static_cast<float>(be);
  const void* alpha_p = &alf;
  const void* beta_p = &bef;
  switch (out.dtype()) {
    case kFloat64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      alpha_p = &al;
      beta_p = &be;
      break;
    case kFloat16:
      type = CUDA_R_16F;
      break;
    case kBFloat16:
      type = CUDA_R_16BF;
      break;
    default:
      break;
  }
  // Row-major C[m, n] = A @ B is column-major C^T[n, m] = B^T[n, k] @ A^T[k, m].
  check_cublas(
      cublasGemmStridedBatchedEx(h, B.op, A.op, static_cast<int>(n), static_cast<int>(m),
                                 static_cast<int>(k), alpha_p, B.data, type, static_cast<int>(B.ld),
                                 B.batch_stride, A.data, type, static_cast<int>(A.ld),
                                 A.batch_stride, beta_p, out.data_ptr(), type, static_cast<int>(n),
                                 m * n, static_cast<int>(batches), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx", device);
}

}  // namespace tl::cuda::detail
