// Device-side helpers of the CUDA kernels: element types, conversions with the CPU's
// semantics, the strided offset calculator and the launch shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensorlib/cuda/kernel_args.h"

namespace tl::cuda::kernels {

// The device type of each ScalarType (bit layouts equal tl::Half / tl::BFloat16).
template <ScalarType S>
struct DevType;
template <>
struct DevType<ScalarType::Bool> {
  using type = bool;
};
template <>
struct DevType<ScalarType::UInt8> {
  using type = uint8_t;
};
template <>
struct DevType<ScalarType::Int8> {
  using type = int8_t;
};
template <>
struct DevType<ScalarType::Int16> {
  using type = int16_t;
};
template <>
struct DevType<ScalarType::Int32> {
  using type = int32_t;
};
template <>
struct DevType<ScalarType::Int64> {
  using type = int64_t;
};
template <>
struct DevType<ScalarType::Float16> {
  using type = __half;
};
template <>
struct DevType<ScalarType::BFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct DevType<ScalarType::Float32> {
  using type = float;
};
template <>
struct DevType<ScalarType::Float64> {
  using type = double;
};

template <typename T>
inline constexpr bool is_low_float_v =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_low_float_v<T>;

// The compute type, as opmath_t on the CPU (bool computes as int, as the CPU kernels do).
template <typename T>
struct DevOpMath {
  using type = T;
};
template <>
struct DevOpMath<__half> {
  using type = float;
};
template <>
struct DevOpMath<__nv_bfloat16> {
  using type = float;
};
template <>
struct DevOpMath<bool> {
  using type = int;
};
template <typename T>
using dev_opmath_t = typename DevOpMath<T>::type;

template <typename M, typename T>
__device__ __forceinline__ M to_math(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<M>(__half2float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<M>(__bfloat162float(v));
  } else {
    return static_cast<M>(v);
  }
}

// cpu::convert's semantics: through float for the 16-bit floats, != 0 for bool.
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  using FM = std::conditional_t<is_low_float_v<From>, float, From>;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_math<FM>(v) != FM(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(to_math<FM>(v)));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(to_math<FM>(v)));
  } else {
    return static_cast<To>(to_math<FM>(v));
  }
}

// Calls f.template operator()<T>() with T the device type of `dtype`.
template <typename F>
void dispatch_all(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Bool:
      return f.template operator()<bool>();
    case ScalarType::UInt8:
      return f.template operator()<uint8_t>();
    case ScalarType::Int8:
      return f.template operator()<int8_t>();
    case ScalarType::Int16:
      return f.template operator()<int16_t>();
    case ScalarType::Int32:
      return f.template operator()<int32_t>();
    case ScalarType::Int64:
      return f.template operator()<int64_t>();
    case ScalarType::Float16:
      return f.template operator()<__half>();
    case ScalarType::BFloat16:
      return f.template operator()<__nv_bfloat16>();
    case ScalarType::Float32:
      return f.template operator()<float>();
    case ScalarType::Float64:
      return f.template operator()<double>();
  }
}

// Note [Offset calculator]
// As ATen's OffsetCalculator: a linear index into the (coalesced) iteration space is split
// into per-dim indices innermost first, each multiplied by every operand's stride. Index is
// int32_t when Strided::use32 says every index and offset fits (integer division is about
// twice as fast in 32 bits), int64_t otherwise. A one-dim space (every contiguous or
// broadcast-scalar op after coalescing) skips the divisions.
template <int N, typename Index>
__device__ __forceinline__ void offsets_of(const Strided<N>& s, int64_t linear, Index* off) {
  if (s.ndim == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k)
      off[k] = static_cast<Index>(linear) * static_cast<Index>(s.strides[k][0]);
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  Index rest = static_cast<Index>(linear);
  for (int d = 0; d < s.ndim; ++d) {
    const Index size = static_cast<Index>(s.sizes[d]);
    const Index q = rest / size;
    const Index r = rest - q * size;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * static_cast<Index>(s.strides[k][d]);
    rest = q;
  }
}

template <typename T, int N, typename Index>
__device__ __forceinline__ T load(const Strided<N>& s, int k, Index off) {
  if (s.by_value[k]) {
    T v;
    memcpy(&v, s.value[k], sizeof(T));
    return v;
  }
  return reinterpret_cast<const T*>(s.data[k])[off];
}

template <typename T, int N, typename Index>
__device__ __forceinline__ T& ref(const Strided<N>& s, int k, Index off) {
  return reinterpret_cast<T*>(s.data[k])[off];
}

inline constexpr int kBlock = 256;  // threads per block of the elementwise kernels

// Calls f(offsets) for every element, grid-stride.
template <int N, typename Index, typename F>
__global__ void __launch_bounds__(kBlock) strided_kernel(Strided<N> s, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.numel;
       i += step) {
    Index off[N];
    offsets_of<N, Index>(s, i, off);
    f(s, off);
  }
}

/// Enough blocks to fill the current device (8 resident blocks of 256 threads per SM), fewer
/// for small tensors; the kernels stride over the rest.
int grid_for(int64_t n);

// Launches f over s on `stream` (nothing for an empty space); returns cudaGetLastError().
template <int N, typename F>
cudaError_t launch_strided(const Strided<N>& s, cudaStream_t stream, F f) {
  if (s.numel == 0) return cudaSuccess;
  const int grid = grid_for(s.numel);
  if (s.use32) {
    strided_kernel<N, int32_t><<<grid, kBlock, 0, stream>>>(s, f);
  } else {
    strided_kernel<N, int64_t><<<grid, kBlock, 0, stream>>>(s, f);
  }
  return cudaGetLastError();
}

}  // namespace tl::cuda::kernels
