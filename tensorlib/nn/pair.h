// The (height, width) arguments of the 2-D layers, spelled as PyTorch's int-or-tuple
// arguments: `3` means {3, 3}, `{3, 5}` means height 3 and width 5.
#pragma once

#include <cstdint>
#include <ostream>

namespace tl::nn {

struct IntPair {
  IntPair(int64_t v) : h(v), w(v) {}  // NOLINT(google-explicit-constructor): `3` is {3, 3}
  IntPair(int64_t height, int64_t width) : h(height), w(width) {}
  bool operator==(const IntPair&) const = default;
  int64_t h, w;
};

struct DoublePair {
  DoublePair(double v) : h(v), w(v) {}  // NOLINT(google-explicit-constructor): `2.0` is {2, 2}
  DoublePair(double height, double width) : h(height), w(width) {}
  bool operator==(const DoublePair&) const = default;
  double h, w;
};

inline std::ostream& operator<<(std::ostream& os, const IntPair& p) {
  return os << "[" << p.h << ", " << p.w << "]";
}
inline std::ostream& operator<<(std::ostream& os, const DoublePair& p) {
  return os << "[" << p.h << ", " << p.w << "]";
}

}  // namespace tl::nn
