// Elementwise CUDA kernels: copies and casts, fills, unary and binary math, where, clamp,
// masked_fill.
//
// Note [CUDA kernel design]
// The host side (elementwise.cpp, compiled by the C++ compiler) turns tensors into a
// Strided<N> (kernel_args.h): operands broadcast to one shape, dims coalesced, element
// strides, and whether 32-bit indexing suffices. These files hold only kernels and their
// launchers, so nvcc never parses tl::Tensor. Each kernel is a functor run by one grid-stride
// template (strided_kernel, device_util.cuh) on the caller's stream; kernels are instantiated
// per dtype and index width only, the op being a uniform runtime switch over the shared
// formulas of core/elementwise_math.h (Note [One kernel body]), which keeps the build small.
#include <atomic>

#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {

int grid_for(int64_t n) {
  // Each device's SM count, cached by whichever thread asks first. Relaxed atomics: threads
  // racing to fill it store the same value, and none ever reads a count half-written (or the
  // -1 of a failed query) from another.
  static std::atomic<int> sm_count[64] = {};
  int device = 0;
  cudaGetDevice(&device);
  std::atomic<int>& cached = sm_count[device & 63];
  int sms = cached.load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      (void)cudaGetLastError();
      sms = 1;
    }
    cached.store(sms, std::memory_order_relaxed);
  }
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t cap = static_cast<int64_t>(sms) * 8;
  return static_cast<int>(blocks < cap ? blocks : cap);
}

namespace {

template <typename T>
T value_as(Number v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(v.f));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v.f));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v.f);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.f != 0.0;  // as Scalar::to<bool>(): 0.5, NaN and inf are true
  } else {
    return static_cast<T>(v.i);
  }
}

template <typename M>
M math_value(Number v) {
  if constexpr (std::is_floating_point_v<M>) {
    return static_cast<M>(v.f);
  } else {
    return static_cast<M>(v.i);
  }
}

template <typename Dst>
struct CopyFn {
  ScalarType src;
  template <typename Index>
  __device__ void operator()(const Strided<2>& s, const Index* off) const {
    Dst& d = ref<Dst>(s, 0, off[0]);
    switch (src) {
#define TL_COPY_CASE(S)                                                          \
  case ScalarType::S:                                                            \
    d = convert<Dst>(load<typename DevType<ScalarType::S>::type>(s, 1, off[1])); \
    return;
      TL_COPY_CASE(Bool)
      TL_COPY_CASE(UInt8)
      TL_COPY_CASE(Int32)
      TL_COPY_CASE(Int64)
      TL_COPY_CASE(Float16)
      TL_COPY_CASE(BFloat16)
      TL_COPY_CASE(Float32)
      TL_COPY_CASE(Float64)
#undef TL_COPY_CASE
    }
  }
};

template <typename T>
struct FillFn {
  T value;
  template <typename Index>
  __device__ void operator()(const Strided<1>& s, const Index* off) const {
    ref<T>(s, 0, off[0]) = value;
  }
};

template <typename T>
struct UnaryFn {
  math::UnaryOp op;
  template <typename Index>
  __device__ void operator()(const Strided<2>& s, const Index* off) const {
    using M = dev_opmath_t<T>;
    const M x = to_math<M>(load<T>(s, 1, off[1]));
    M y = x;
    switch (op) {
      case math::UnaryOp::neg:
        y = math::unary<math::UnaryOp::neg>(x);
        break;
      case math::UnaryOp::abs:
        y = math::unary<math::UnaryOp::abs>(x);
        break;
      case math::UnaryOp::relu:
        y = math::unary<math::UnaryOp::relu>(x);
        break;
      default:
        if constexpr (std::is_floating_point_v<M>) {
          switch (op) {
#define TL_UNARY_CASE(NAME)                  \
  case math::UnaryOp::NAME:                  \
    y = math::unary<math::UnaryOp::NAME>(x); \
    break;
            TL_UNARY_CASE(exp)
            TL_UNARY_CASE(log)
            TL_UNARY_CASE(sqrt)
            TL_UNARY_CASE(rsqrt)
            TL_UNARY_CASE(sin)
            TL_UNARY_CASE(cos)
            TL_UNARY_CASE(tanh)
            TL_UNARY_CASE(sigmoid)
            TL_UNARY_CASE(gelu)
            TL_UNARY_CASE(reciprocal)
#undef TL_UNARY_CASE
            default:
              break;
          }
        }
    }
    ref<T>(s, 0, off[0]) = convert<T>(y);
  }
};

template <typename T>
struct BinaryFn {
  math::BinaryOp op;
  dev_opmath_t<T> alpha;
  template <typename Index>
  __device__ void operator()(const Strided<3>& s, const Index* off) const {
    using M = dev_opmath_t<T>;
    using math::BinaryOp;
    const M x = to_math<M>(load<T>(s, 1, off[1]));
    const M y = to_math<M>(load<T>(s, 2, off[2]));
    if (math::is_comparison(op)) {
      bool r = false;
      switch (op) {
#define TL_COMPARE_CASE(NAME)                \
  case BinaryOp::NAME:                       \
    r = math::compare<BinaryOp::NAME>(x, y); \
    break;
        TL_COMPARE_CASE(eq)
        TL_COMPARE_CASE(ne)
        TL_COMPARE_CASE(lt)
        TL_COMPARE_CASE(le)
        TL_COMPARE_CASE(gt)
        TL_COMPARE_CASE(ge)
#undef TL_COMPARE_CASE
        default:
          break;
      }
      ref<bool>(s, 0, off[0]) = r;
      return;
    }
    M r = M(0);
    switch (op) {
#define TL_ARITH_CASE(NAME)                        \
  case BinaryOp::NAME:                             \
    r = math::binary<BinaryOp::NAME>(x, y, alpha); \
    break;
      TL_ARITH_CASE(add)
      TL_ARITH_CASE(sub)
      TL_ARITH_CASE(mul)
      TL_ARITH_CASE(div)
      TL_ARITH_CASE(pow)
      TL_ARITH_CASE(gelu_backward)
      TL_ARITH_CASE(relu_backward)
#undef TL_ARITH_CASE
      default:
        break;
    }
    ref<T>(s, 0, off[0]) = convert<T>(r);
  }
};

template <typename T>
struct WhereFn {
  template <typename Index>
  __device__ void operator()(const Strided<4>& s, const Index* off) const {
    ref<T>(s, 0, off[0]) = load<bool>(s, 1, off[1]) ? load<T>(s, 2, off[2]) : load<T>(s, 3, off[3]);
  }
};

template <typename T>
struct ClampFn {
  bool has_lo, has_hi;
  dev_opmath_t<T> lo, hi;
  template <typename Index>
  __device__ void operator()(const Strided<2>& s, const Index* off) const {
    using M = dev_opmath_t<T>;
    const T x = load<T>(s, 1, off[1]);
    const M v = to_math<M>(x);
    ref<T>(s, 0, off[0]) = math::is_nan(v) ? x : convert<T>(math::clamp(v, has_lo, lo, has_hi, hi));
  }
};

template <typename T>
struct MaskedFillFn {
  T value;
  template <typename Index>
  __device__ void operator()(const Strided<2>& s, const Index* off) const {
    if (load<bool>(s, 1, off[1])) ref<T>(s, 0, off[0]) = value;
  }
};

}  // namespace

cudaError_t launch_copy(const Strided<2>& s, ScalarType dst, ScalarType src, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dst, [&]<typename D>() { err = launch_strided(s, stream, CopyFn<D>{src}); });
  return err;
}

cudaError_t launch_fill(const Strided<1>& s, ScalarType dtype, Number value, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(
      dtype, [&]<typename T>() { err = launch_strided(s, stream, FillFn<T>{value_as<T>(value)}); });
  return err;
}

cudaError_t launch_unary(math::UnaryOp op, const Strided<2>& s, ScalarType dtype,
                         cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() { err = launch_strided(s, stream, UnaryFn<T>{op}); });
  return err;
}

cudaError_t launch_binary(math::BinaryOp op, const Strided<3>& s, ScalarType dtype, Number alpha,
                          cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    err = launch_strided(s, stream, BinaryFn<T>{op, math_value<dev_opmath_t<T>>(alpha)});
  });
  return err;
}

cudaError_t launch_where(const Strided<4>& s, ScalarType dtype, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() { err = launch_strided(s, stream, WhereFn<T>{}); });
  return err;
}

cudaError_t launch_clamp(const Strided<2>& s, ScalarType dtype, bool has_lo, Number lo, bool has_hi,
                         Number hi, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    using M = dev_opmath_t<T>;
    err =
        launch_strided(s, stream, ClampFn<T>{has_lo, has_hi, math_value<M>(lo), math_value<M>(hi)});
  });
  return err;
}

cudaError_t launch_masked_fill(const Strided<2>& s, ScalarType dtype, Number value,
                               cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  dispatch_all(dtype, [&]<typename T>() {
    err = launch_strided(s, stream, MaskedFillFn<T>{value_as<T>(value)});
  });
  return err;
}

}  // namespace tl::cuda::kernels
