// Integer matrix products on the GPU (cuBLAS has no int64 or uint8 GEMM): a 16 x 16 tiled
// kernel through shared memory, one output element per thread, accumulating in 64-bit
// wrapping arithmetic and finishing with alpha/beta as the CPU's gemm_loop does. Integer
// matmuls are rare in tensorlib's models, so it is plain rather than fast.
#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

constexpr int kTile = 16;

template <typename T>
__global__ void __launch_bounds__(kTile* kTile) int_gemm_kernel(IntGemm g) {
  __shared__ uint64_t as[kTile][kTile + 1];
  __shared__ uint64_t bs[kTile][kTile + 1];
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const int tx = threadIdx.x, ty = threadIdx.y;
  auto wide = [](T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); };
  // Every loop bound depends on the block only, so all its threads reach each __syncthreads.
  for (int64_t batch = blockIdx.z; batch < g.batches; batch += gridDim.z) {
    for (int64_t ti = blockIdx.y; ti * kTile < g.m; ti += gridDim.y) {
      for (int64_t tj = blockIdx.x; tj * kTile < g.n; tj += gridDim.x) {
        const int64_t i = ti * kTile + ty, j = tj * kTile + tx;
        uint64_t acc = 0;
        for (int64_t p0 = 0; p0 < g.k; p0 += kTile) {
          as[ty][tx] = i < g.m && p0 + tx < g.k
                           ? wide(a[batch * g.a_bs + i * g.a_rs + (p0 + tx) * g.a_cs])
                           : 0;
          bs[ty][tx] = p0 + ty < g.k && j < g.n
                           ? wide(b[batch * g.b_bs + (p0 + ty) * g.b_rs + j * g.b_cs])
                           : 0;
          __syncthreads();
#pragma unroll
          for (int q = 0; q < kTile; ++q) acc += as[ty][q] * bs[q][tx];
          __syncthreads();
        }
        if (i < g.m && j < g.n) {
          T& out = c[(batch * g.m + i) * g.n + j];
          uint64_t v = static_cast<uint64_t>(g.alpha) * acc;
          if (g.use_beta) v += static_cast<uint64_t>(g.beta) * wide(out);
          out = static_cast<T>(static_cast<int64_t>(v));
        }
      }
    }
  }
}

unsigned grid_dim(int64_t n, int64_t cap) {
  return static_cast<unsigned>(n < cap ? n : cap);
}

}  // namespace

cudaError_t launch_int_gemm(const IntGemm& g, ScalarType dtype, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0 || g.batches == 0) return cudaSuccess;
  const dim3 block(kTile, kTile);
  const dim3 grid(grid_dim((g.n + kTile - 1) / kTile, 65535),
                  grid_dim((g.m + kTile - 1) / kTile, 65535), grid_dim(g.batches, 65535));
  switch (dtype) {
    case ScalarType::UInt8:
      int_gemm_kernel<uint8_t><<<grid, block, 0, stream>>>(g);
      break;
    case ScalarType::Int8:
      int_gemm_kernel<int8_t><<<grid, block, 0, stream>>>(g);
      break;
    case ScalarType::Int16:
      int_gemm_kernel<int16_t><<<grid, block, 0, stream>>>(g);
      break;
    case ScalarType::Int32:
      int_gemm_kernel<int32_t><<<grid, block, 0, stream>>>(g);
      break;
    case ScalarType::Int64:
      int_gemm_kernel<int64_t><<<grid, block, 0, stream>>>(g);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tl::cuda::kernels
