// What the host side of the CUDA backend hands its kernels (tensorlib/cuda/*.cu): plain
// structs and launch functions, no tl::Tensor, so nvcc compiles only small translation units
// (Note [CUDA kernel design] in elementwise.cu). Included by tensorlib/cuda/ only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensorlib/core/dtype.h"
#include "tensorlib/core/elementwise_math.h"

namespace tl::cuda::kernels {

inline constexpr int kMaxDims = 25;  // after coalescing, as PyTorch's MAX_DIMS

/// An N-operand iteration space: broadcast, coalesced, innermost dim first, element strides.
/// Operand k with `by_value[k]` set is a number (a 0-dim CPU tensor) stored in value[k].
template <int N>
struct Strided {
  int ndim = 1;
  bool use32 = true;  // every index and offset fits in int32 (the fast path)
  int64_t numel = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  char* data[N];
  bool by_value[N];
  alignas(8) unsigned char value[N][8];
};

/// A number in the compute type of a kernel's dtype: integers as int64, floats as double.
struct Number {
  int64_t i = 0;
  double f = 0;
};

cudaError_t launch_copy(const Strided<2>& s, ScalarType dst, ScalarType src, cudaStream_t stream);
cudaError_t launch_fill(const Strided<1>& s, ScalarType dtype, Number value, cudaStream_t stream);
cudaError_t launch_unary(math::UnaryOp op, const Strided<2>& s, ScalarType dtype,
                         cudaStream_t stream);
/// Operands (out, a, b); `dtype` is a's and b's (out is bool for comparisons).
cudaError_t launch_binary(math::BinaryOp op, const Strided<3>& s, ScalarType dtype, Number alpha,
                          cudaStream_t stream);
/// Operands (out, cond, a, b).
cudaError_t launch_where(const Strided<4>& s, ScalarType dtype, cudaStream_t stream);
cudaError_t launch_clamp(const Strided<2>& s, ScalarType dtype, bool has_lo, Number lo, bool has_hi,
                         Number hi, cudaStream_t stream);
/// Operands (self, mask).
cudaError_t launch_masked_fill(const Strided<2>& s, ScalarType dtype, Number value,
                               cudaStream_t stream);

/// Operands (index, self, other) over the index's shape, self's stride along the dim zeroed:
/// gather writes other[p] = self[p + index[p] * dim_stride], scatter_add adds other into self.
cudaError_t launch_gather(const Strided<3>& s, ScalarType dtype, int64_t dim_stride,
                          int64_t dim_size, cudaStream_t stream);
cudaError_t launch_scatter_add(const Strided<3>& s, ScalarType dtype, int64_t dim_stride,
                               int64_t dim_size, cudaStream_t stream);

/// cub::DeviceSelect::Flagged over the linear positions 0..n-1 of `flags`: the positions of
/// the true ones into `out` (room for n), their count into `*count` (device memory). With
/// `temp` null, only sets `*temp_bytes`.
cudaError_t launch_select_flagged(void* temp, size_t* temp_bytes, const bool* flags, int64_t n,
                                  int64_t* out, int64_t* count, cudaStream_t stream);
/// out[i * nd + d] = the index along dim d of linear position flat[i] in `sizes` (nd dims).
cudaError_t launch_unravel(const int64_t* flat, int64_t n, const int64_t* sizes, int nd,
                           int64_t* out, cudaStream_t stream);

/// A window over [batch, channels, height, width] images (core/kernels.h's Window2d).
struct Window {
  int64_t batch, channels, height, width;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t out_h, out_w;
};
/// cols [batch, channels*kh*kw, out_h*out_w] from contiguous images; `pad` outside them.
cudaError_t launch_im2col(const void* img, void* cols, ScalarType dtype, const Window& w,
                          double pad, cudaStream_t stream);
/// img = the adjoint of im2col of cols (every pixel written once: no atomics).
cudaError_t launch_col2im(const void* cols, void* img, ScalarType dtype, const Window& w,
                          cudaStream_t stream);

enum class RowOp : uint8_t { sum, prod, mean, max, min, argmax, argmin, var, std, logsumexp };

/// The bytes of one partial of a split reduction (Note [Split full reductions], reduce.cu).
inline constexpr int64_t kPartialBytes = 32;
/// Rows shorter than this are never split; a split row's chunks hold at least this many.
inline constexpr int64_t kSplitChunk = int64_t{1} << 14;
/// At most this many (row, chunk) blocks in a split reduction's first pass.
inline constexpr int64_t kMaxSplitBlocks = 2048;

/// Into how many chunks each row is split (1: one pass, a warp or block per row). A function
/// of the shape only, so results do not depend on the GPU.
inline int64_t reduce_chunks(int64_t n_rows, int64_t row_len) {
  if (n_rows <= 0 || row_len < 2 * kSplitChunk || n_rows > kMaxSplitBlocks / 2) return 1;
  const int64_t by_len = row_len / kSplitChunk;  // >= 2
  const int64_t by_blocks = kMaxSplitBlocks / n_rows;
  return by_len < by_blocks ? by_len : by_blocks;
}

/// out[i] = op(in[i * row_len, (i + 1) * row_len)), in contiguous of `in_dtype`; out has
/// `out_dtype` (int64 for argmax/argmin, the input's or int64 for sums of integers); `indices`
/// (int64, may be null) receives max/min's positions. `partials`: device memory of
/// n_rows * reduce_chunks(...) * kPartialBytes bytes when reduce_chunks > 1, else unused.
cudaError_t launch_reduce_rows(RowOp op, const void* in, ScalarType in_dtype, void* out,
                               ScalarType out_dtype, int64_t* indices, int64_t n_rows,
                               int64_t row_len, int64_t correction, void* partials,
                               cudaStream_t stream);
/// Softmax (or log-softmax) along `len` of a contiguous [outer, len, inner] buffer.
cudaError_t launch_softmax(const void* in, void* out, ScalarType dtype, int64_t outer, int64_t len,
                           int64_t inner, bool log, cudaStream_t stream);

/// An integer batched product c[b] = alpha * a[b] @ b[b] (+ beta * c[b]): element (i, j) of
/// operand x in batch t at x + t * x_bs + i * x_rs + j * x_cs; c contiguous [batches, m, n].
struct IntGemm {
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k, batches;
  int64_t a_rs, a_cs, a_bs, b_rs, b_cs, b_bs;
  int64_t alpha, beta;
  bool use_beta;
};
/// uint8, int32 and int64 (cuBLAS has no integer GEMM for them).
cudaError_t launch_int_gemm(const IntGemm& g, ScalarType dtype, cudaStream_t stream);

enum class RandomKind : uint8_t { uniform, normal, integer };  // core's RandomDist

/// A Philox fill (core/philox.h): key `seed`, first counter `offset`; `bits` of each word for
/// uniforms, `low` + x mod `range` for integers.
struct RandomArgs {
  RandomKind dist;
  int bits;
  uint64_t seed, offset;
  int64_t low;
  uint64_t range;
};
/// Fills a contiguous buffer of n elements of `dtype`.
cudaError_t launch_random(void* out, ScalarType dtype, int64_t n, const RandomArgs& args,
                          cudaStream_t stream);

}  // namespace tl::cuda::kernels
