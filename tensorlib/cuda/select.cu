// Data-dependent selection: the positions of the true elements of a flag tensor (CUB's
// DeviceSelect over a counting iterator: one pass writes the positions and their count) and
// their conversion to multi-dim indices. nonzero and masked_select (cpu/indexing.cpp) read the
// count back on the host, the sync point PyTorch's nonzero has too.
#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

__global__ void __launch_bounds__(kBlock)
    unravel_kernel(const int64_t* flat, int64_t n, Strided<1> shape, int64_t* out) {
  const int nd = shape.ndim;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rest = flat[i];
    for (int d = nd - 1; d >= 0; --d) {
      out[i * nd + d] = rest % shape.sizes[d];
      rest /= shape.sizes[d];
    }
  }
}

}  // namespace

cudaError_t launch_select_flagged(void* temp, size_t* temp_bytes, const bool* flags, int64_t n,
                                  int64_t* out, int64_t* count, cudaStream_t stream) {
  return cub::DeviceSelect::Flagged(temp, *temp_bytes, thrust::counting_iterator<int64_t>(0), flags,
                                    out, count, n, stream);
}

cudaError_t launch_unravel(const int64_t* flat, int64_t n, const int64_t* sizes, int nd,
                           int64_t* out, cudaStream_t stream) {
  if (n == 0 || nd == 0) return cudaSuccess;
  if (nd > kMaxDims) return cudaErrorInvalidValue;
  Strided<1> shape{};  // only its sizes (row-major order) are used
  shape.ndim = nd;
  for (int d = 0; d < nd; ++d) shape.sizes[d] = sizes[d];
  unravel_kernel<<<grid_for(n), kBlock, 0, stream>>>(flat, n, shape, out);
  return cudaGetLastError();
}

}  // namespace tl::cuda::kernels
