// A plain CUDA program (no Tidemark code) for gpu_check.sh: device, stream-ordered pool,
// pinned and managed memory, an async pinned upload, a blocking copy into pageable memory,
// a stream and a device synchronize, and a virtual-memory mapping (cuMemCreate / cuMemMap, as
// PyTorch's expandable segments do), inside an NVTX range. Each kind of call is made from a
// function of its own, which the trace's stacks must name (Note [Call sites]). Prints the
// addresses the checks need as key=value lines.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                   \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)

#define CHECK_CU(x)                                            \
  do {                                                         \
    CUresult r = (x);                                          \
    if (r != CUDA_SUCCESS) {                                   \
      const char* name = nullptr;                              \
      cuGetErrorName(r, &name);                                \
      std::fprintf(stderr, "%s: %s\n", #x, name ? name : "?"); \
      std::exit(1);                                            \
    }                                                          \
  } while (0)

constexpr size_t kMiB = 1 << 20;

__attribute__((noinline)) void* allocate_device_memory(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));
  return p;
}

__attribute__((noinline)) void* allocate_from_pool(size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  CHECK(cudaMallocAsync(&p, bytes, stream));
  return p;
}

__attribute__((noinline)) void* allocate_pinned_memory(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMallocHost(&p, bytes));
  return p;
}

__attribute__((noinline)) void upload_async(void* dst, const void* src, size_t bytes,
                                            cudaStream_t stream) {
  CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

__attribute__((noinline)) void copy_back_to_host(void* dst, const void* src, size_t bytes) {
  CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));  // blocking, pageable
}

__attribute__((noinline)) void synchronize_all() {
  CHECK(cudaDeviceSynchronize());
}

// Reserve a range, create one granule of physical memory, map it, use it, undo everything.
__attribute__((noinline)) void map_virtual_memory() {
  int device = 0;
  CHECK(cudaGetDevice(&device));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  CHECK_CU(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr va = 0;
  CHECK_CU(cuMemAddressReserve(&va, 8 * granularity, 0, 0, 0));
  CUmemGenericAllocationHandle handle = 0;
  CHECK_CU(cuMemCreate(&handle, granularity, &prop, 0));
  CHECK_CU(cuMemMap(va + granularity, granularity, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(va + granularity, granularity, &access, 1));
  CHECK(cudaMemset(reinterpret_cast<void*>(va + granularity), 0, granularity));
  synchronize_all();
  CHECK_CU(cuMemUnmap(va + granularity, granularity));
  CHECK_CU(cuMemRelease(handle));
  CHECK_CU(cuMemAddressFree(va, 8 * granularity));
  std::printf("vmm_reserved=%llu\nvmm_mapped=%llu\nvmm_size=%zu\n",
              static_cast<unsigned long long>(va),
              static_cast<unsigned long long>(va + granularity), granularity);
}

int main() {
  nvtxRangePushA("gpu_sample");
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  void* dev = allocate_device_memory(8 * kMiB);
  void* pooled = allocate_from_pool(4 * kMiB, stream);
  void* pinned = allocate_pinned_memory(kMiB);
  void* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 2 * kMiB));
  upload_async(dev, pinned, kMiB, stream);
  CHECK(cudaFreeAsync(pooled, stream));
  CHECK(cudaStreamSynchronize(stream));
  void* pageable = std::malloc(kMiB);
  nvtxMarkA("before_d2h");
  copy_back_to_host(pageable, dev, kMiB);
  synchronize_all();
  std::free(pageable);
  map_virtual_memory();
  CHECK(cudaFree(managed));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(dev));
  CHECK(cudaStreamDestroy(stream));
  nvtxRangePop();
  std::printf("device_ptr=%llu\n",
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(dev)));
  return 0;
}
