// A plain CUDA program (no Tidemark code) for gpu_check.sh: device, stream-ordered pool,
// pinned and managed memory, an async pinned upload, a blocking copy into pageable memory,
// a stream and a device synchronize, inside an NVTX range.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                         \
  do {                                                                   \
    cudaError_t e = (x);                                                 \
    if (e != cudaSuccess) {                                              \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));       \
      return 1;                                                          \
    }                                                                    \
  } while (0)

int main() {
  constexpr size_t kMiB = 1 << 20;
  nvtxRangePushA("gpu_sample");
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  void *dev = nullptr, *pooled = nullptr, *pinned = nullptr, *managed = nullptr;
  CHECK(cudaMalloc(&dev, 8 * kMiB));
  CHECK(cudaMallocAsync(&pooled, 4 * kMiB, stream));
  CHECK(cudaMallocHost(&pinned, kMiB));
  CHECK(cudaMallocManaged(&managed, 2 * kMiB));
  CHECK(cudaMemcpyAsync(dev, pinned, kMiB, cudaMemcpyHostToDevice, stream));
  CHECK(cudaFreeAsync(pooled, stream));
  CHECK(cudaStreamSynchronize(stream));
  void* pageable = std::malloc(kMiB);
  nvtxMarkA("before_d2h");
  CHECK(cudaMemcpy(pageable, dev, kMiB, cudaMemcpyDeviceToHost));  // blocking, pageable
  CHECK(cudaDeviceSynchronize());
  std::free(pageable);
  CHECK(cudaFree(managed));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(dev));
  CHECK(cudaStreamDestroy(stream));
  nvtxRangePop();
  return 0;
}
