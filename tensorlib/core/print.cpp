// Printing like PyTorch's repr: tensor([[1., 2.],
//                                        [3., 4.]], dtype=tl.float64)
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensorlib/core/tensor.h"

namespace tl {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;  // elements, as torch's print options
constexpr int64_t kEdgeItems = 3;

// Chooses one format for every element, as PyTorch's _Formatter does.
class Formatter {
 public:
  explicit Formatter(const std::vector<double>& values, ScalarType dtype)
      : floating_(is_floating_point(dtype)), boolean_(dtype == kBool) {
    if (floating_) choose_mode(values);
    for (double v : values) width_ = std::max(width_, format(v).size());
  }
  void choose_mode(const std::vector<double>& values) {
    bool all_int = true;
    double lo = INFINITY, hi = 0;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::ceil(v)) all_int = false;
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
    }
    if (all_int) {
      mode_ = hi > 1e8 ? Mode::sci : Mode::integral;
    } else if (hi / std::max(lo, 1e-300) > 1000 || hi > 1e8 || (lo < 1e-4 && lo > 0)) {
      mode_ = Mode::sci;
    } else {
      mode_ = Mode::fixed;
    }
  }
  std::string format(double v) const {
    if (boolean_) return v != 0 ? "True" : "False";
    char buf[64];
    if (!floating_) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if (std::isnan(v)) {
      return "nan";
    } else if (std::isinf(v)) {
      return v > 0 ? "inf" : "-inf";
    } else if (mode_ == Mode::integral) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else if (mode_ == Mode::sci) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
  std::string padded(double v) const {
    std::string s = format(v);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  enum class Mode { integral, fixed, sci };
  bool floating_, boolean_;
  Mode mode_ = Mode::fixed;
  size_t width_ = 0;
};

void print_dim(std::ostream& os, const Tensor& t, const Formatter& f, int indent, bool summarize) {
  if (t.dim() == 0) {
    os << f.padded(t.item().to_double());
    return;
  }
  int64_t n = t.size(0);
  auto emit_range = [&](auto&& each) {
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        each(-1);
        i = n - kEdgeItems - 1;
        continue;
      }
      each(i);
    }
  };
  os << '[';
  bool first = true;
  if (t.dim() == 1) {
    emit_range([&](int64_t i) {
      if (!first) os << ", ";
      first = false;
      if (i < 0)
        os << " ...";
      else
        os << f.padded(t.select(0, i).item().to_double());
    });
  } else {
    std::string sep = "," + std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
    emit_range([&](int64_t i) {
      if (!first) os << sep;
      first = false;
      if (i < 0)
        os << "...";
      else
        print_dim(os, t.select(0, i), f, indent + 1, summarize);
    });
  }
  os << ']';
}

void collect(const Tensor& t, std::vector<double>& out, bool summarize) {
  if (t.dim() == 0) {
    out.push_back(t.item().to_double());
    return;
  }
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), out, summarize);
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  Tensor c = t.is_cpu() ? t : t.cpu();
  bool summarize = c.numel() > kSummarizeThreshold;
  std::vector<double> values;
  collect(c, values, summarize);
  Formatter f(values, c.dtype());
  os << "tensor(";
  if (c.numel() == 0 && c.dim() > 0) {
    os << "[]";
  } else {
    print_dim(os, c, f, 7, summarize);
  }
  if (c.numel() == 0 && c.dim() != 1) os << ", size=" << c.sizes();
  if (!t.is_cpu()) os << ", device='" << t.device() << "'";
  bool implied = c.dtype() == get_default_dtype() || c.dtype() == kInt64 || c.dtype() == kBool;
  if (!implied) os << ", dtype=tl." << c.dtype();
  return os << ')';
}

}  // namespace tl
