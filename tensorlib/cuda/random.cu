// The random factories on the GPU (Note [Counter-based random tensors] in core/philox.h): one
// thread per Philox counter, grid-stride, writing the 4 (randint: 2) elements of its counter
// with the formulas the CPU loop uses, so the values depend on (seed, offset, i) only.
#include "tensorlib/core/philox.h"
#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

template <typename T>
__global__ void __launch_bounds__(kBlock) random_kernel(T* out, int64_t n, RandomArgs a) {
  // The compute type of the floating draws: double for double, float for the rest (as
  // PyTorch's curand-based kernels).
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int per = a.dist == RandomKind::integer ? 2 : 4;
  const int64_t counters = (n + per - 1) / per;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < counters;
       c += step) {
    const random::Words4 r = random::philox_block(a.seed, a.offset + static_cast<uint64_t>(c));
    const int64_t first = c * per;
    if (a.dist == RandomKind::integer) {
      for (int k = 0; k < 2 && first + k < n; ++k)
        out[first + k] =
            convert<T>(random::uniform_int(r.w[2 * k], r.w[2 * k + 1], a.low, a.range));
      continue;
    }
    M z[4];
    if (a.dist == RandomKind::uniform) {
      for (int k = 0; k < 4; ++k) z[k] = random::uniform_bits<M>(r.w[k], a.bits);
    } else {
      random::box_muller<M>(r.w[0], r.w[1], z[0], z[1]);
      random::box_muller<M>(r.w[2], r.w[3], z[2], z[3]);
    }
    for (int k = 0; k < 4 && first + k < n; ++k) out[first + k] = convert<T>(z[k]);
  }
}

}  // namespace

cudaError_t launch_random(void* out, ScalarType dtype, int64_t n, const RandomArgs& args,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t per = args.dist == RandomKind::integer ? 2 : 4;
  const int64_t counters = (n + per - 1) / per;
  cudaError_t err = cudaErrorInvalidValue;
  dispatch_all(dtype, [&]<typename T>() {
    random_kernel<T><<<grid_for(counters), kBlock, 0, stream>>>(static_cast<T*>(out), n, args);
    err = cudaGetLastError();
  });
  return err;
}

}  // namespace tl::cuda::kernels
