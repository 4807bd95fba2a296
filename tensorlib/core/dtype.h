// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

namespace tl {

// Ordered as PyTorch's promotion lattice is easiest to state; do not reorder (tables below).
enum class ScalarType : int8_t {
  Bool = 0,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
inline constexpr int kNumScalarTypes = 10;

inline constexpr ScalarType kBool = ScalarType::Bool;
inline constexpr ScalarType kUInt8 = ScalarType::UInt8;
inline constexpr ScalarType kByte = ScalarType::UInt8;
inline constexpr ScalarType kInt8 = ScalarType::Int8;
inline constexpr ScalarType kChar = ScalarType::Int8;
inline constexpr ScalarType kInt16 = ScalarType::Int16;
inline constexpr ScalarType kShort = ScalarType::Int16;
inline constexpr ScalarType kInt32 = ScalarType::Int32;
inline constexpr ScalarType kInt = ScalarType::Int32;
inline constexpr ScalarType kInt64 = ScalarType::Int64;
inline constexpr ScalarType kLong = ScalarType::Int64;
inline constexpr ScalarType kFloat16 = ScalarType::Float16;
inline constexpr ScalarType kHalf = ScalarType::Float16;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
inline constexpr ScalarType kFloat32 = ScalarType::Float32;
inline constexpr ScalarType kFloat = ScalarType::Float32;
inline constexpr ScalarType kFloat64 = ScalarType::Float64;
inline constexpr ScalarType kDouble = ScalarType::Float64;

// IEEE binary16, stored as bits; arithmetic happens in float.
struct Half {
  uint16_t x = 0;
  Half() = default;
  Half(float f) : x(from_float(f)) {}             // NOLINT(google-explicit-constructor)
  operator float() const { return to_float(x); }  // NOLINT(google-explicit-constructor)
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  BFloat16(float f) : x(from_float(f)) {}  // NOLINT(google-explicit-constructor)
  operator float() const {                 // NOLINT(google-explicit-constructor)
    uint32_t bits = uint32_t(x) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static uint16_t from_float(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if (std::isnan(f)) return 0x7fc0;
    uint32_t rounding_bias = 0x7fff + ((bits >> 16) & 1);
    return static_cast<uint16_t>((bits + rounding_bias) >> 16);
  }
};

size_t element_size(ScalarType t);
std::string_view dtype_name(ScalarType t);  // "float32", "int64", ...
inline bool is_floating_point(ScalarType t) {
  return t >= ScalarType::Float16;
}
inline bool is_integral(ScalarType t, bool include_bool = false) {
  return (t == ScalarType::Bool) ? include_bool : !is_floating_point(t);
}
// PyTorch's promote_types: the smallest type both convert to without losing category.
ScalarType promote_types(ScalarType a, ScalarType b);

std::ostream& operator<<(std::ostream& os, ScalarType t);

// The C++ type of each ScalarType.
template <ScalarType S>
struct CppTypeOf;
template <>
struct CppTypeOf<ScalarType::Bool> {
  using type = bool;
};
template <>
struct CppTypeOf<ScalarType::UInt8> {
  using type = uint8_t;
};
template <>
struct CppTypeOf<ScalarType::Int8> {
  using type = int8_t;
};
template <>
struct CppTypeOf<ScalarType::Int16> {
  using type = int16_t;
};
template <>
struct CppTypeOf<ScalarType::Int32> {
  using type = int32_t;
};
template <>
struct CppTypeOf<ScalarType::Int64> {
  using type = int64_t;
};
template <>
struct CppTypeOf<ScalarType::Float16> {
  using type = Half;
};
template <>
struct CppTypeOf<ScalarType::BFloat16> {
  using type = BFloat16;
};
template <>
struct CppTypeOf<ScalarType::Float32> {
  using type = float;
};
template <>
struct CppTypeOf<ScalarType::Float64> {
  using type = double;
};

template <typename T>
constexpr ScalarType scalar_type_of();
template <>
constexpr ScalarType scalar_type_of<bool>() {
  return ScalarType::Bool;
}
template <>
constexpr ScalarType scalar_type_of<uint8_t>() {
  return ScalarType::UInt8;
}
template <>
constexpr ScalarType scalar_type_of<int8_t>() {
  return ScalarType::Int8;
}
template <>
constexpr ScalarType scalar_type_of<int16_t>() {
  return ScalarType::Int16;
}
template <>
constexpr ScalarType scalar_type_of<int32_t>() {
  return ScalarType::Int32;
}
template <>
constexpr ScalarType scalar_type_of<int64_t>() {
  return ScalarType::Int64;
}
template <>
constexpr ScalarType scalar_type_of<Half>() {
  return ScalarType::Float16;
}
template <>
constexpr ScalarType scalar_type_of<BFloat16>() {
  return ScalarType::BFloat16;
}
template <>
constexpr ScalarType scalar_type_of<float>() {
  return ScalarType::Float32;
}
template <>
constexpr ScalarType scalar_type_of<double>() {
  return ScalarType::Float64;
}

// The type arithmetic on T is carried out in (float for the 16-bit floats).
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

// Accumulator for reductions: double for floating types, int64 for integers.
template <typename T>
struct AccType {
  using type = int64_t;
};
template <>
struct AccType<Half> {
  using type = double;
};
template <>
struct AccType<BFloat16> {
  using type = double;
};
template <>
struct AccType<float> {
  using type = double;
};
template <>
struct AccType<double> {
  using type = double;
};
template <typename T>
using acc_t = typename AccType<T>::type;

// The default floating dtype (float32 unless set_default_dtype changes it).
ScalarType get_default_dtype();
void set_default_dtype(ScalarType t);

}  // namespace tl

// Calls `fn.template operator()<T>()` with T the C++ type of `dtype`:
//   TL_DISPATCH_ALL(dt, "add", [&]<typename T>() { ... });
#define TL_DISPATCH_CASE(S, ...) \
  case ::tl::ScalarType::S:      \
    return __VA_ARGS__.template operator()<typename ::tl::CppTypeOf<::tl::ScalarType::S>::type>();

#define TL_DISPATCH_ALL(DTYPE, NAME, ...)                 \
  [&]() {                                                 \
    switch (DTYPE) {                                      \
      TL_DISPATCH_CASE(Bool, __VA_ARGS__)                 \
      TL_DISPATCH_CASE(UInt8, __VA_ARGS__)                \
      TL_DISPATCH_CASE(Int8, __VA_ARGS__)                 \
      TL_DISPATCH_CASE(Int16, __VA_ARGS__)                \
      TL_DISPATCH_CASE(Int32, __VA_ARGS__)                \
      TL_DISPATCH_CASE(Int64, __VA_ARGS__)                \
      TL_DISPATCH_CASE(Float16, __VA_ARGS__)              \
      TL_DISPATCH_CASE(BFloat16, __VA_ARGS__)             \
      TL_DISPATCH_CASE(Float32, __VA_ARGS__)              \
      TL_DISPATCH_CASE(Float64, __VA_ARGS__)              \
    }                                                     \
    TL_CHECK(false, NAME, ": unsupported dtype ", DTYPE); \
    __builtin_unreachable();                              \
  }()

#define TL_DISPATCH_FLOATING(DTYPE, NAME, ...)                               \
  [&]() {                                                                    \
    switch (DTYPE) {                                                         \
      TL_DISPATCH_CASE(Float16, __VA_ARGS__)                                 \
      TL_DISPATCH_CASE(BFloat16, __VA_ARGS__)                                \
      TL_DISPATCH_CASE(Float32, __VA_ARGS__)                                 \
      TL_DISPATCH_CASE(Float64, __VA_ARGS__)                                 \
      default:                                                               \
        break;                                                               \
    }                                                                        \
    TL_CHECK(false, NAME, ": expected a floating point dtype, got ", DTYPE); \
    __builtin_unreachable();                                                 \
  }()
