// The scalar math of tensorlib's elementwise ops, written once for both backends.
//
// Note [One kernel body]
// Every elementwise op's per-element formula lives here as a TL_HOST_DEVICE function of the
// op's compute type M (opmath_t: float for the 16-bit floats, int for bool): the CPU kernels
// call it from their loops (tensorlib/cpu/elementwise.cpp, compile-time op, so the loops
// still vectorise) and the CUDA kernels from theirs (tensorlib/cuda/elementwise.cu, the op a
// uniform runtime switch, so one kernel per dtype serves every op). The CPU test suite thereby
// checks the formulas the GPU runs; only loading, storing and indexing differ per backend.
// The list of ops is the enums below: adding an op is one enumerator, one case here, and the
// entry point in elementwise.cpp.
//
// Host builds use <cmath>; the device pass (__CUDA_ARCH__) the CUDA math library's overloads
// of the same names, which give the same results within their documented ulp bounds.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TL_HOST_DEVICE __host__ __device__
#else
#define TL_HOST_DEVICE
#endif

namespace tl::math {

enum class UnaryOp : uint8_t {
  // keep the dtype (bool computes as int)
  neg,
  abs,
  relu,
  // floating only (integer inputs are converted to the default dtype first)
  exp,
  log,
  sqrt,
  rsqrt,
  sin,
  cos,
  tanh,
  sigmoid,
  gelu,
  reciprocal,
};
inline constexpr int kNumUnaryOps = 13;
inline constexpr bool keeps_dtype(UnaryOp op) {
  return op <= UnaryOp::relu;
}

enum class BinaryOp : uint8_t {
  add,
  sub,
  mul,
  div,
  pow,  // result in the common dtype (add/sub take alpha)
  eq,
  ne,
  lt,
  le,
  gt,
  ge,             // result bool
  gelu_backward,  // (grad, x) -> grad * d/dx gelu(x); floating only
  relu_backward,  // (grad, relu's result y) -> y > 0 ? grad : 0 (threshold_backward)
};
inline constexpr bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::eq && op <= BinaryOp::ge;
}

/// The ops' names as PyTorch spells them, for messages.
inline const char* name(UnaryOp op) {
  constexpr const char* names[] = {"neg", "abs", "relu", "exp",     "log",  "sqrt",      "rsqrt",
                                   "sin", "cos", "tanh", "sigmoid", "gelu", "reciprocal"};
  return names[static_cast<int>(op)];
}
inline const char* name(BinaryOp op) {
  constexpr const char* names[] = {"add",
                                   "sub",
                                   "mul",
                                   "div",
                                   "pow",
                                   "eq",
                                   "ne",
                                   "lt",
                                   "le",
                                   "gt",
                                   "ge",
                                   "gelu_backward",
                                   "threshold_backward"};
  return names[static_cast<int>(op)];
}

#if defined(__CUDA_ARCH__)
#define TL_MATH_FN(NAME)                           \
  TL_HOST_DEVICE inline float NAME##_(float x) {   \
    return ::NAME##f(x);                           \
  }                                                \
  TL_HOST_DEVICE inline double NAME##_(double x) { \
    return ::NAME(x);                              \
  }
#else
#define TL_MATH_FN(NAME)            \
  inline float NAME##_(float x) {   \
    return std::NAME(x);            \
  }                                 \
  inline double NAME##_(double x) { \
    return std::NAME(x);            \
  }
#endif
TL_MATH_FN(exp)
TL_MATH_FN(log)
TL_MATH_FN(sqrt)
TL_MATH_FN(sin)
TL_MATH_FN(cos)
TL_MATH_FN(tanh)
TL_MATH_FN(erf)
#undef TL_MATH_FN

TL_HOST_DEVICE inline float pow_(float x, float y) {
#if defined(__CUDA_ARCH__)
  return ::powf(x, y);
#else
  return std::pow(x, y);
#endif
}
TL_HOST_DEVICE inline double pow_(double x, double y) {
#if defined(__CUDA_ARCH__)
  return ::pow(x, y);
#else
  return std::pow(x, y);
#endif
}

template <typename M>
TL_HOST_DEVICE inline bool is_nan(M v) {
  if constexpr (std::is_floating_point_v<M>) {
    return v != v;
  } else {
    return false;
  }
}

// Integer powers by squaring; negative exponents give 0 except for bases 1 and -1 (PyTorch).
template <typename M>
TL_HOST_DEVICE inline M int_pow(M base, M exp) {
  if constexpr (std::is_integral_v<M> && !std::is_same_v<M, bool>) {
    if constexpr (std::is_signed_v<M>) {
      if (exp < 0) return base == 1 ? 1 : (base == -1 ? (exp % 2 ? -1 : 1) : 0);
    }
    M result = 1;
    while (exp) {
      if (exp & 1) result *= base;
      base *= base;
      exp >>= 1;
    }
    return result;
  } else {
    return static_cast<M>(pow_(base, exp));
  }
}

inline constexpr double kSqrtHalf = 0.70710678118654752440;    // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)

template <UnaryOp Op, typename M>
TL_HOST_DEVICE inline M unary(M x) {
  if constexpr (Op == UnaryOp::neg) {
    return -x;
  } else if constexpr (Op == UnaryOp::abs) {
    if constexpr (std::is_unsigned_v<M>) {
      return x;
    } else {
      return x < 0 ? -x : x;
    }
  } else if constexpr (Op == UnaryOp::relu) {
    return x > 0 ? x : M(0);
  } else if constexpr (!std::is_floating_point_v<M>) {
    static_assert(std::is_floating_point_v<M>, "a floating-only op on an integer type");
    return x;
  } else if constexpr (Op == UnaryOp::exp) {
    return exp_(x);
  } else if constexpr (Op == UnaryOp::log) {
    return log_(x);
  } else if constexpr (Op == UnaryOp::sqrt) {
    return sqrt_(x);
  } else if constexpr (Op == UnaryOp::rsqrt) {
    return M(1) / sqrt_(x);
  } else if constexpr (Op == UnaryOp::sin) {
    return sin_(x);
  } else if constexpr (Op == UnaryOp::cos) {
    return cos_(x);
  } else if constexpr (Op == UnaryOp::tanh) {
    return tanh_(x);
  } else if constexpr (Op == UnaryOp::sigmoid) {
    return M(1) / (M(1) + exp_(-x));
  } else if constexpr (Op == UnaryOp::gelu) {
    return M(0.5) * x * (M(1) + erf_(x * M(kSqrtHalf)));
  } else {
    static_assert(Op == UnaryOp::reciprocal);
    return M(1) / x;
  }
}

// The result of a non-comparison binary op in the compute type; alpha scales y for add/sub.
template <BinaryOp Op, typename M>
TL_HOST_DEVICE inline M binary(M x, M y, M alpha) {
  if constexpr (Op == BinaryOp::add) {
    return x + alpha * y;
  } else if constexpr (Op == BinaryOp::sub) {
    return x - alpha * y;
  } else if constexpr (Op == BinaryOp::mul) {
    return x * y;
  } else if constexpr (Op == BinaryOp::div) {
    return x / y;
  } else if constexpr (Op == BinaryOp::pow) {
    return int_pow(x, y);
  } else if constexpr (Op == BinaryOp::relu_backward) {
    return y > M(0) ? x : M(0);  // where(y > 0, grad, 0), in one pass
  } else if constexpr (Op == BinaryOp::gelu_backward) {
    if constexpr (std::is_floating_point_v<M>) {
      // d/dx x*Phi(x) = Phi(x) + x*phi(x)
      const M cdf = M(0.5) * (M(1) + erf_(y * M(kSqrtHalf)));
      const M pdf = exp_(M(-0.5) * y * y) * M(kInvSqrt2Pi);
      return x * (cdf + y * pdf);
    } else {
      return x;
    }
  } else {
    static_assert(is_comparison(Op), "unhandled binary op");
    return M(0);
  }
}

template <BinaryOp Op, typename M>
TL_HOST_DEVICE inline bool compare(M x, M y) {
  if constexpr (Op == BinaryOp::eq) return x == y;
  if constexpr (Op == BinaryOp::ne) return x != y;
  if constexpr (Op == BinaryOp::lt) return x < y;
  if constexpr (Op == BinaryOp::le) return x <= y;
  if constexpr (Op == BinaryOp::gt) return x > y;
  if constexpr (Op == BinaryOp::ge) return x >= y;
  return false;
}

// clamp: NaN propagates; the bounds are optional.
template <typename M>
TL_HOST_DEVICE inline M clamp(M v, bool has_lo, M lo, bool has_hi, M hi) {
  if (is_nan(v)) return v;
  if (has_lo && v < lo) v = lo;
  if (has_hi && v > hi) v = hi;
  return v;
}

}  // namespace tl::math
