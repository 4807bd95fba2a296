// CUDA gather and scatter_add (index_select runs as a gather with an expanded index).
//
// Indices are checked on the device: an index out of range prints the index and the size and
// stops the kernel (__trap), which the next CUDA call reports as a launch failure, as
// PyTorch's device-side asserts do. Reading the indices on the host first, as the CPU kernels
// do, would make every gather a sync point.
#include <cstdio>

#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

__device__ __forceinline__ int64_t checked_index(int64_t i, int64_t size, const char* op) {
  if (i < 0 || i >= size) {
    printf("%s: index %lld is out of bounds for dimension with size %lld\n", op,
           static_cast<long long>(i), static_cast<long long>(size));
    __trap();
  }
  return i;
}

// Bytes and 16-bit integers have no atomic add: they go through their aligned 32-bit word
// (which the caching allocator's 512-byte granularity keeps inside the allocation), as ATen's
// AtomicAddIntegerImpl<uint8_t, 1>: added by compare-and-swap, wrapping as on the CPU (int8 and
// int16 in two's complement). bool ORs instead (the CPU computes bool + bool in int and converts
// back: a || b).
template <typename U>  // unsigned char or unsigned short
__device__ __forceinline__ void atomic_add_narrow(U* p, U v, bool is_bool = false) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t{3});
  const unsigned int shift = static_cast<unsigned int>(addr & 3) * 8;
  if (is_bool) {
    if (v != 0) atomicOr(word, 1u << shift);
    return;
  }
  constexpr unsigned int mask = (1u << (8 * sizeof(U))) - 1;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int sum = ((assumed >> shift) + v) & mask;
    old = atomicCAS(word, assumed, (assumed & ~(mask << shift)) | (sum << shift));
  } while (assumed != old);
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> ||
                std::is_same_v<T, int8_t>) {
    atomic_add_narrow(reinterpret_cast<unsigned char*>(p), static_cast<unsigned char>(v),
                      std::is_same_v<T, bool>);
  } else if constexpr (std::is_same_v<T, int16_t>) {
    atomic_add_narrow(reinterpret_cast<unsigned short*>(p), static_cast<unsigned short>(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);
  }
}

// gather (other[p] = self[p + index[p] * dim_stride]) or scatter_add (self[...] += other[p]).
template <typename T, bool kScatter>
struct AlongDimFn {
  int64_t dim_stride, dim_size;
  template <typename Index>
  __device__ void operator()(const Strided<3>& s, const Index* off) const {
    const int64_t i =
        checked_index(load<int64_t>(s, 0, off[0]), dim_size, kScatter ? "scatter_add_" : "gather");
    T* self = reinterpret_cast<T*>(s.data[1]) + static_cast<int64_t>(off[1]) + i * dim_stride;
    if constexpr (kScatter) {
      atomic_add(self, load<T>(s, 2, off[2]));
    } else {
      ref<T>(s, 2, off[2]) = *self;
    }
  }
};

}  // namespace

cudaError_t launch_gather(const Strided<3>& s, ScalarType dtype, int64_t dim_stride,
                          int64_t dim_size, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    err = launch_strided(s, stream, AlongDimFn<T, false>{dim_stride, dim_size});
  });
  return err;
}

cudaError_t launch_scatter_add(const Strided<3>& s, ScalarType dtype, int64_t dim_stride,
                               int64_t dim_size, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    err = launch_strided(s, stream, AlongDimFn<T, true>{dim_stride, dim_size});
  });
  return err;
}

}  // namespace tl::cuda::kernels
