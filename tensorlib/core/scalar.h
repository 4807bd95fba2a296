// A number passed where a tensor could be (`x + 1`, `full({2}, 0.5)`), as at::Scalar. Its kind
// (bool, integral, floating) takes part in type promotion as a "wrapped number".
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "tensorlib/core/dtype.h"

namespace tl {

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Double };

  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT(google-explicit-constructor)
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : kind_(Kind::Double), d_(float(v)) {}             // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::Double), d_(float(v)) {}         // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Double; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  double to_double() const { return kind_ == Kind::Double ? d_ : double(i_); }
  int64_t to_long() const { return kind_ == Kind::Double ? int64_t(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Double ? d_ != 0 : i_ != 0; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_long());
    else if constexpr (std::is_same_v<T, double>)
      return to_double();
    else
      return T(static_cast<float>(to_double()));
  }

  // The dtype a zero-dim tensor holding this value would have (float -> default dtype).
  ScalarType type() const {
    switch (kind_) {
      case Kind::Bool:
        return ScalarType::Bool;
      case Kind::Int:
        return ScalarType::Int64;
      default:
        return ScalarType::Float64;
    }
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return os << s.to_long();
  return os << s.to_double();
}

}  // namespace tl
