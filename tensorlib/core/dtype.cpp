#include "tensorlib/core/dtype.h"

#include <atomic>
#include <iterator>

#include "tensorlib/base/error.h"

namespace tl {

size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8:
      return 1;
    case ScalarType::Int16:
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int32:
    case ScalarType::Float32:
      return 4;
    case ScalarType::Int64:
    case ScalarType::Float64:
      return 8;
  }
  TL_INTERNAL_ASSERT(false, "bad ScalarType ", int(t));
  return 0;
}

std::string_view dtype_name(ScalarType t) {
  constexpr std::string_view names[] = {"bool",  "uint8",   "int8",     "int16",   "int32",
                                        "int64", "float16", "bfloat16", "float32", "float64"};
  static_assert(std::size(names) == kNumScalarTypes);
  return names[static_cast<int>(t)];
}

std::ostream& operator<<(std::ostream& os, ScalarType t) {
  return os << dtype_name(t);
}

// PyTorch's promote_types restricted to tensorlib's dtypes: bool promotes to anything;
// integers to the wider integer (int8 < int16 < int32 < int64, uint8 < int16), uint8 with int8
// meeting at int16; any float beats any integer; float16 with bfloat16 meets at float32;
// otherwise the wider float.
ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (a == ScalarType::Bool) return b;
  if (b == ScalarType::Bool) return a;
  bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa != fb) return fa ? a : b;
  if (fa && fb) {
    auto lo = std::min(a, b), hi = std::max(a, b);
    if (lo == ScalarType::Float16 && hi == ScalarType::BFloat16) return ScalarType::Float32;
    return hi;
  }
  auto lo = std::min(a, b), hi = std::max(a, b);
  if (lo == ScalarType::UInt8 && hi == ScalarType::Int8) return ScalarType::Int16;
  return hi;
}

namespace {
std::atomic<ScalarType> g_default_dtype{ScalarType::Float32};
}

ScalarType get_default_dtype() {
  return g_default_dtype.load(std::memory_order_relaxed);
}

void set_default_dtype(ScalarType t) {
  TL_CHECK(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 ||
               t == ScalarType::BFloat16,
           "only floating-point types are supported as the default type, got ", t);
  g_default_dtype.store(t);
}

// IEEE 754 binary16 <-> binary32, round to nearest even, with subnormals, inf and nan.
uint16_t Half::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {                                                 // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry into exp: correct
  return static_cast<uint16_t>(h);
}

float Half::to_float(uint16_t h) {
  uint32_t sign = (uint32_t(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace tl
