// CUDA reductions over dense rows (Note [Reduction layout] in cpu/reduce.cpp) and softmax.
//
// Note [CUDA row reductions]
// The host lays the input out as contiguous rows exactly as the CPU does, so one kernel serves
// every reduction: a warp per row when rows are short (<= 1024 elements; eight rows per
// block), a block of 256 threads per row otherwise. Threads stride over the row (coalesced),
// combine with warp shuffles (and shared memory across warps), and thread 0 writes. As
// PyTorch's CUDA reductions, floating inputs accumulate in opmath (float for float32 and the
// 16-bit floats, double for float64); integers in 64-bit arithmetic that wraps. var/std and
// logsumexp read their row (or chunk) twice, mean or maximum first. max/min and argmax/argmin keep
// the first position on ties and propagate NaN (its first position), as the CPU kernels do.
#include <cfloat>
#include <cmath>

#include "tensorlib/core/row_moments.h"
#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

constexpr int kWarp = 32;

template <typename A>
__device__ __forceinline__ A shfl_down(A v, int delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}

// Combines `v` over the `Threads` threads of a row (a warp, or a 256-thread block); the result
// is valid in the row's first thread. `scratch` holds one A per warp of the block.
template <int Threads, typename A, typename F>
__device__ A row_combine(A v, F combine, A* scratch) {
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) v = combine(v, shfl_down(v, d));
  if constexpr (Threads > kWarp) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // scratch may still be read by a previous combine
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
      // Lane 0 combines exactly the Threads / kWarp partials (lanes beyond are never read).
      v = scratch[lane < Threads / kWarp ? lane : 0];
#pragma unroll
      for (int d = Threads / kWarp / 2; d > 0; d /= 2) v = combine(v, shfl_down(v, d));
    }
  }
  return v;
}

// Broadcasts the value of the row's first thread to all its threads.
template <int Threads, typename A>
__device__ A row_broadcast(A v, A* scratch) {
  if constexpr (Threads == kWarp) {
    return __shfl_sync(0xffffffffu, v, 0);
  } else {
    __syncthreads();
    if (threadIdx.x == 0) scratch[0] = v;
    __syncthreads();
    return scratch[0];
  }
}

template <typename T>
struct RowArgs {
  RowOp op;
  const T* in;
  void* out;
  int64_t* indices;
  int64_t n_rows;
  int64_t row_len;
  int64_t correction;
  unsigned char* partials;  // split reductions: one kPartialBytes slot per (row, chunk)
  int64_t chunks;           // 1: each row in one pass
};

template <typename M, bool kMax>
__device__ __forceinline__ bool better(M a, int64_t ia, bool nan_a, M b, int64_t ib, bool nan_b) {
  // Is (a, ia) the one to keep against (b, ib)? NaN first, then the extreme, then the first.
  if (nan_a != nan_b) return nan_a;
  if (nan_a) return ia < ib;
  if (a != b) return kMax ? a > b : a < b;
  return ia < ib;
}

template <typename M>
struct Pos {
  M v;
  int64_t at;  // -1: no element seen
  bool nan;
};

template <typename M>
__device__ __forceinline__ Pos<M> pick(bool is_max, const Pos<M>& x, const Pos<M>& y) {
  if (x.at < 0) return y;
  if (y.at < 0) return x;
  const bool keep_x = is_max ? better<M, true>(x.v, x.at, x.nan, y.v, y.at, y.nan)
                             : better<M, false>(x.v, x.at, x.nan, y.v, y.at, y.nan);
  return keep_x ? x : y;
}

// The accumulator of sum/mean/prod: opmath for floats, 64-bit wrapping for integers and bool.
template <typename T>
using SumAcc = std::conditional_t<is_float_v<T>, dev_opmath_t<T>, uint64_t>;

// The last step of sum/mean/prod from a row's combined accumulator.
template <typename T, typename O>
__device__ void finish_sum(const RowArgs<T>& a, int64_t row, SumAcc<T> acc) {
  O* out = static_cast<O*>(a.out);
  if constexpr (is_float_v<T>) {
    if (a.op == RowOp::mean) acc = a.row_len == 0 ? SumAcc<T>(NAN) : acc / SumAcc<T>(a.row_len);
    out[row] = convert<O>(acc);
  } else {
    out[row] = convert<O>(static_cast<int64_t>(acc));
  }
}

// The last step of max/min/argmax/argmin from a row's best position.
template <typename T, typename O>
__device__ void finish_pos(const RowArgs<T>& a, int64_t row, const Pos<dev_opmath_t<T>>& best) {
  if (a.op == RowOp::argmax || a.op == RowOp::argmin) {
    static_cast<int64_t*>(a.out)[row] = best.at;
  } else {
    static_cast<O*>(a.out)[row] = convert<O>(a.in[row * a.row_len + (best.at < 0 ? 0 : best.at)]);
    if (a.indices != nullptr) a.indices[row] = best.at;
  }
}

// The last step of var/std/logsumexp from a row's mean and M2, or maximum and shifted sum.
template <typename T, typename O>
__device__ void finish_moments(const RowArgs<T>& a, int64_t row, dev_opmath_t<T> first,
                               dev_opmath_t<T> second) {
  O* out = static_cast<O*>(a.out);
  if (a.op == RowOp::logsumexp) {
    out[row] = convert<O>(math::finish_lse(first, second));
  } else {
    out[row] = convert<O>(math::finish_var(second, a.row_len, a.correction, a.op == RowOp::std));
  }
}

// Reduces row `row` over [lo, hi) with `Threads` threads. With `partial`, thread 0 stores the
// accumulator there (a split reduction's first pass) instead of finishing the row (Note
// [Split full reductions]).
template <int Threads, typename T, typename O>
__device__ void reduce_row(const RowArgs<T>& a, int64_t row, int64_t lo, int64_t hi, int tid,
                           void* smem, unsigned char* partial) {
  using M = dev_opmath_t<T>;
  constexpr bool kFloat = is_float_v<T>;
  using Acc = SumAcc<T>;
  const T* p = a.in + row * a.row_len;
  auto* scratch = static_cast<Acc*>(smem);
  auto as_acc = [](T v) -> Acc {
    if constexpr (kFloat) {
      return to_math<M>(v);
    } else {
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
  };
  switch (a.op) {
    case RowOp::sum:
    case RowOp::mean:
    case RowOp::prod: {
      const bool prod = a.op == RowOp::prod;
      Acc acc = prod ? Acc(1) : Acc(0);
      for (int64_t i = lo + tid; i < hi; i += Threads)
        acc = prod ? acc * as_acc(p[i]) : acc + as_acc(p[i]);
      acc = row_combine<Threads>(
          acc, [prod](Acc x, Acc y) { return prod ? x * y : x + y; }, scratch);
      if (tid != 0) return;
      if (partial != nullptr) {
        *reinterpret_cast<Acc*>(partial) = acc;
      } else {
        finish_sum<T, O>(a, row, acc);
      }
      return;
    }
    case RowOp::var:
    case RowOp::std:
    case RowOp::logsumexp: {
      // Two passes over [lo, hi): the mean or the maximum, then the squared deviations or the
      // shifted exponentials (core/row_moments.h says what a split chunk's partial holds).
      if constexpr (kFloat) {
        const bool lse = a.op == RowOp::logsumexp;
        M first = lse ? M(-INFINITY) : M(0);
        for (int64_t i = lo + tid; i < hi; i += Threads) {
          const M v = to_math<M>(p[i]);
          first = lse ? math::nan_max(v, first) : first + v;
        }
        first = row_combine<Threads>(
            first, [lse](M x, M y) { return lse ? math::nan_max(x, y) : x + y; }, scratch);
        if (!lse && tid == 0) first = first / M(hi - lo);
        first = row_broadcast<Threads>(first, scratch);
        const M shift = lse ? math::lse_shift(first) : first;
        M second = 0;
        for (int64_t i = lo + tid; i < hi; i += Threads) {
          const M d = to_math<M>(p[i]) - shift;
          second += lse ? math::exp_(d) : d * d;
        }
        second = row_combine<Threads>(
            second, [](M x, M y) { return x + y; }, scratch);
        if (tid != 0) return;
        if (partial != nullptr) {
          *reinterpret_cast<math::RowMoments<M>*>(partial) = {first, second, hi - lo};
        } else {
          finish_moments<T, O>(a, row, first, second);
        }
      }
      return;
    }
    case RowOp::max:
    case RowOp::min:
    case RowOp::argmax:
    case RowOp::argmin: {
      const bool is_max = a.op == RowOp::max || a.op == RowOp::argmax;
      Pos<M> best{M(0), -1, false};
      for (int64_t i = lo + tid; i < hi; i += Threads) {
        const M v = to_math<M>(p[i]);
        best = pick(is_max, best, Pos<M>{v, i, math::is_nan(v)});
      }
      // Combine field by field (shuffles move scalars).
#pragma unroll
      for (int d = kWarp / 2; d > 0; d /= 2) {
        Pos<M> o{shfl_down(best.v, d), shfl_down(best.at, d),
                 static_cast<bool>(shfl_down(int(best.nan), d))};
        best = pick(is_max, best, o);
      }
      if constexpr (Threads > kWarp) {
        auto* ps = static_cast<Pos<M>*>(smem);
        const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
        __syncthreads();
        if (lane == 0) ps[warp] = best;
        __syncthreads();
        if (tid != 0) return;
        for (int w = 1; w < Threads / kWarp; ++w) best = pick(is_max, best, ps[w]);
      }
      if (tid != 0) return;
      if (partial != nullptr) {
        *reinterpret_cast<Pos<M>*>(partial) = best;
      } else {
        finish_pos<T, O>(a, row, best);
      }
      return;
    }
  }
}

// Scratch for one block: 8 warps' partials of the widest accumulator (Pos<double>).
constexpr int kScratchBytes = 8 * sizeof(Pos<double>);
static_assert(sizeof(Pos<double>) <= kPartialBytes && alignof(Pos<double>) <= 8);
static_assert(sizeof(math::RowMoments<double>) <= kPartialBytes &&
              alignof(math::RowMoments<double>) <= 8);

template <int Threads, typename T, typename O>
__global__ void __launch_bounds__(256) rows_kernel(RowArgs<T> a) {
  __shared__ alignas(16) unsigned char smem[kScratchBytes];
  constexpr int kRowsPerBlock = 256 / Threads;
  const int tid = threadIdx.x % Threads;
  const int sub = threadIdx.x / Threads;
  // The loop bound is uniform per block when Threads == 256 (the __syncthreads rule).
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; base < a.n_rows;
       base += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t row = base + sub;
    if (row < a.n_rows) reduce_row<Threads, T, O>(a, row, 0, a.row_len, tid, smem, nullptr);
  }
}

// Note [Split full reductions]
// A few very long rows (a full reduction above all: one row of numel elements) would run on
// a few blocks and leave the GPU idle. `reduce_chunks` (kernel_args.h) splits each row of
// sum/mean/prod/max/min/argmax/argmin into chunks when rows are few and long: the first
// kernel reduces each (row, chunk) with a block into a partial (the accumulator in opmath,
// or the best position), the second combines each row's partials in chunk order with one
// thread and finishes the row as the one-pass kernel would. The chunking is a function of the
// shape alone and every combine runs in a fixed order, so results are deterministic (and the
// same on every GPU); accumulation stays in opmath (float for float32), partial sums of
// about 16K elements each. var/std/logsumexp split too: each chunk is reduced in two passes
// over its own elements to (mean, M2) or (maximum, shifted sum of exponentials), and the
// combine merges them with Chan's update or by rescaling to the larger maximum
// (core/row_moments.h, whose merges the CPU tests check against the CPU's whole-row results).
template <typename T, typename O>
__global__ void __launch_bounds__(256) split_rows_kernel(RowArgs<T> a) {
  __shared__ alignas(16) unsigned char smem[kScratchBytes];
  const int64_t slot = blockIdx.x;  // < n_rows * chunks <= kMaxSplitBlocks
  const int64_t row = slot / a.chunks, chunk = slot % a.chunks;
  const int64_t len = (a.row_len + a.chunks - 1) / a.chunks;
  const int64_t lo = chunk * len, hi = lo + len < a.row_len ? lo + len : a.row_len;
  reduce_row<256, T, O>(a, row, lo, hi, threadIdx.x, smem, a.partials + slot * kPartialBytes);
}

template <typename T, typename O>
__global__ void __launch_bounds__(256) combine_partials_kernel(RowArgs<T> a) {
  using M = dev_opmath_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= a.n_rows) return;
  const unsigned char* part = a.partials + row * a.chunks * kPartialBytes;
  if (a.op == RowOp::sum || a.op == RowOp::mean || a.op == RowOp::prod) {
    const bool prod = a.op == RowOp::prod;
    SumAcc<T> acc = prod ? SumAcc<T>(1) : SumAcc<T>(0);
    for (int64_t c = 0; c < a.chunks; ++c) {
      const SumAcc<T> v = *reinterpret_cast<const SumAcc<T>*>(part + c * kPartialBytes);
      acc = prod ? acc * v : acc + v;
    }
    finish_sum<T, O>(a, row, acc);
  } else if (a.op == RowOp::var || a.op == RowOp::std || a.op == RowOp::logsumexp) {
    if constexpr (is_float_v<T>) {
      const bool lse = a.op == RowOp::logsumexp;
      math::RowMoments<M> acc{M(0), M(0), 0};
      for (int64_t c = 0; c < a.chunks; ++c) {
        const auto& m = *reinterpret_cast<const math::RowMoments<M>*>(part + c * kPartialBytes);
        acc = lse ? math::merge_lse(acc, m) : math::merge_var(acc, m);
      }
      finish_moments<T, O>(a, row, acc.first, acc.second);
    }
  } else {
    const bool is_max = a.op == RowOp::max || a.op == RowOp::argmax;
    Pos<M> best{M(0), -1, false};
    for (int64_t c = 0; c < a.chunks; ++c)
      best = pick(is_max, best, *reinterpret_cast<const Pos<M>*>(part + c * kPartialBytes));
    finish_pos<T, O>(a, row, best);
  }
}

template <typename T, typename O>
cudaError_t launch_rows(const RowArgs<T>& a, cudaStream_t stream) {
  if (a.n_rows == 0) return cudaSuccess;
  if (a.chunks > 1) {
    const int64_t slots = a.n_rows * a.chunks;
    split_rows_kernel<T, O><<<static_cast<unsigned>(slots), 256, 0, stream>>>(a);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    combine_partials_kernel<T, O>
        <<<static_cast<unsigned>((a.n_rows + 255) / 256), 256, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const bool per_warp = a.row_len <= 1024;
  const int64_t rows_per_block = per_warp ? 256 / kWarp : 1;
  int64_t blocks = (a.n_rows + rows_per_block - 1) / rows_per_block;
  if (blocks > (int64_t{1} << 30)) blocks = int64_t{1} << 30;
  if (per_warp) {
    rows_kernel<kWarp, T, O><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a);
  } else {
    rows_kernel<256, T, O><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

// One warp per (outer, inner) column of a [outer, len, inner] buffer: max, sum of exp, write.
template <typename T>
__global__ void __launch_bounds__(256)
    softmax_kernel(const T* in, T* out, int64_t outer, int64_t len, int64_t inner, bool log) {
  using M = dev_opmath_t<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
       col < outer * inner; col += warps) {
    const int64_t o = col / inner, i = col - o * inner;
    const T* src = in + o * len * inner + i;
    T* dst = out + o * len * inner + i;
    M mx = M(-INFINITY);
    for (int64_t k = lane; k < len; k += kWarp) mx = fmax(mx, to_math<M>(src[k * inner]));
#pragma unroll
    for (int d = kWarp / 2; d > 0; d /= 2) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    M sum = 0;
    for (int64_t k = lane; k < len; k += kWarp) sum += math::exp_(to_math<M>(src[k * inner]) - mx);
#pragma unroll
    for (int d = kWarp / 2; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    const M log_sum = math::log_(sum);
    for (int64_t k = lane; k < len; k += kWarp) {
      const M shifted = to_math<M>(src[k * inner]) - mx;
      dst[k * inner] = convert<T>(log ? shifted - log_sum : math::exp_(shifted) / sum);
    }
  }
}

}  // namespace

cudaError_t launch_reduce_rows(RowOp op, const void* in, ScalarType in_dtype, void* out,
                               ScalarType out_dtype, int64_t* indices, int64_t n_rows,
                               int64_t row_len, int64_t correction, void* partials,
                               cudaStream_t stream) {
  const int64_t chunks = reduce_chunks(n_rows, row_len);
  if (chunks > 1 && partials == nullptr) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  dispatch_all(in_dtype, [&]<typename T>() {
    RowArgs<T> a{op,         static_cast<const T*>(in),
                 out,        indices,
                 n_rows,     row_len,
                 correction, static_cast<unsigned char*>(partials),
                 chunks};
    // Output types: the input's, or int64 (integer sums and products, arg reductions).
    if (out_dtype == ScalarType::Int64 && in_dtype != ScalarType::Int64) {
      err = launch_rows<T, int64_t>(a, stream);
    } else {
      err = launch_rows<T, T>(a, stream);
    }
  });
  return err;
}

cudaError_t launch_softmax(const void* in, void* out, ScalarType dtype, int64_t outer, int64_t len,
                           int64_t inner, bool log, cudaStream_t stream) {
  if (outer * inner == 0 || len == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      const int64_t cols = outer * inner;
      int64_t blocks = (cols + 7) / 8;
      if (blocks > (int64_t{1} << 30)) blocks = int64_t{1} << 30;
      softmax_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
          static_cast<const T*>(in), static_cast<T*>(out), outer, len, inner, log);
      err = cudaGetLastError();
    } else {
      err = cudaErrorInvalidValue;
    }
  });
  return err;
}

}  // namespace tl::cuda::kernels
