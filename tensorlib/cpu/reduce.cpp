// The CPU backend's reductions (their front-ends: ops/reduce.cpp): dense rows as Note
// [Reduction layout] lays them out, and softmax.
//
// Accumulation happens in acc_t<T> (double for floating types, int64 for integers), so a
// float32 sum is as accurate as PyTorch's cascade sum and 16-bit floats do not saturate.
// Integer sums and products wrap like PyTorch's (computed in uint64, which is defined).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensorlib/core/row_moments.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {
namespace {

using detail::ReduceOp;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// out[i] = f(row i, row_len) for every row (out of element type O).
template <typename T, typename O, typename F>
void for_rows(const Tensor& out, const Tensor& rows, int64_t n_rows, int64_t row_len, F f) {
  const T* in = rows.data_ptr<T>();
  O* o = out.data_ptr<O>();
  for (int64_t i = 0; i < n_rows; ++i) o[i] = f(in + i * row_len, row_len);
}

// Integer accumulation goes through uint64 so that overflow wraps (as in PyTorch) instead of
// being undefined behaviour.
template <typename T>
using wrap_acc_t = std::conditional_t<std::is_integral_v<acc_t<T>>, uint64_t, acc_t<T>>;

template <typename T>
wrap_acc_t<T> to_wrap_acc(T v) {
  if constexpr (std::is_integral_v<acc_t<T>>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return convert<acc_t<T>>(v);
  }
}

template <typename T>
acc_t<T> from_wrap_acc(wrap_acc_t<T> v) {
  return static_cast<acc_t<T>>(v);
}

// The position of the largest (kMax) or smallest value in p[0, n), n > 0: the first one on
// ties, and the first NaN when there is one (NaN propagates, as in PyTorch).
template <bool kMax, typename T>
int64_t best_index(const T* p, int64_t n) {
  using M = opmath_t<T>;
  M best = static_cast<M>(p[0]);
  int64_t at = 0;
  if constexpr (std::is_floating_point_v<M>) {
    if (std::isnan(best)) return 0;
  }
  for (int64_t i = 1; i < n; ++i) {
    const M v = static_cast<M>(p[i]);
    if constexpr (std::is_floating_point_v<M>) {
      if (std::isnan(v)) return i;
    }
    if (kMax ? v > best : v < best) {
      best = v;
      at = i;
    }
  }
  return at;
}

template <bool kSum>
void accumulate(const Tensor& out, const Tensor& rows, int64_t n_rows, int64_t row_len) {
  TL_DISPATCH_ALL(rows.dtype(), kSum ? "sum" : "prod", [&]<typename T>() {
    auto row_acc = [](const T* p, int64_t n) {
      wrap_acc_t<T> acc = kSum ? 0 : 1;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kSum) {
          acc += to_wrap_acc(p[i]);
        } else {
          acc *= to_wrap_acc(p[i]);
        }
      }
      return from_wrap_acc<T>(acc);
    };
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, int64_t>) {
      if (out.dtype() == kInt64) return for_rows<T, int64_t>(out, rows, n_rows, row_len, row_acc);
    }
    TL_INTERNAL_ASSERT(out.dtype() == rows.dtype());
    for_rows<T, T>(out, rows, n_rows, row_len,
                   [&](const T* p, int64_t n) { return convert<T>(row_acc(p, n)); });
  });
}

template <bool kMax>
void extreme(const Tensor& out, const Tensor& indices, const Tensor& rows, int64_t n_rows,
             int64_t row_len) {
  TL_DISPATCH_ALL(rows.dtype(), kMax ? "max" : "min", [&]<typename T>() {
    const T* in = rows.data_ptr<T>();
    T* v = out.data_ptr<T>();
    int64_t* ix = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    for (int64_t i = 0; i < n_rows; ++i) {
      const T* row = in + i * row_len;
      const int64_t at = best_index<kMax>(row, row_len);
      v[i] = row[at];
      if (ix != nullptr) ix[i] = at;
    }
  });
}

template <bool kMax>
void arg_extreme(const Tensor& out, const Tensor& rows, int64_t n_rows, int64_t row_len) {
  TL_DISPATCH_ALL(rows.dtype(), kMax ? "argmax" : "argmin", [&]<typename T>() {
    for_rows<T, int64_t>(out, rows, n_rows, row_len,
                         [](const T* p, int64_t n) { return best_index<kMax>(p, n); });
  });
}

// Two-pass variance in double: the mean, then the sum of squared deviations, divided by
// max(0, N - correction) as PyTorch does (so N <= correction gives nan or inf).
void variance(const Tensor& out, const Tensor& rows, int64_t n_rows, int64_t row_len,
              int64_t correction, bool take_sqrt) {
  TL_DISPATCH_FLOATING(rows.dtype(), take_sqrt ? "std" : "var", [&]<typename T>() {
    for_rows<T, T>(out, rows, n_rows, row_len, [&](const T* p, int64_t n) {
      if (n == 0) return convert<T>(kNaN);
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += convert<double>(p[i]);
      mean /= double(n);
      double m2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double dev = convert<double>(p[i]) - mean;
        m2 += dev * dev;
      }
      return convert<T>(math::finish_var(m2, n, correction, take_sqrt));
    });
  });
}

}  // namespace

void Kernels::reduce_rows(ReduceOp op, const Tensor& out, const Tensor& indices, const Tensor& rows,
                          int64_t n_rows, int64_t row_len, int64_t correction) const {
  if (n_rows == 0) return;
  switch (op) {
    case ReduceOp::sum:
      return accumulate<true>(out, rows, n_rows, row_len);
    case ReduceOp::prod:
      return accumulate<false>(out, rows, n_rows, row_len);
    case ReduceOp::mean:
      return TL_DISPATCH_FLOATING(rows.dtype(), "mean", [&]<typename T>() {
        for_rows<T, T>(out, rows, n_rows, row_len, [](const T* p, int64_t n) {
          if (n == 0) return convert<T>(kNaN);
          double acc = 0;
          for (int64_t i = 0; i < n; ++i) acc += convert<double>(p[i]);
          return convert<T>(acc / double(n));
        });
      });
    case ReduceOp::max:
      return extreme<true>(out, indices, rows, n_rows, row_len);
    case ReduceOp::min:
      return extreme<false>(out, indices, rows, n_rows, row_len);
    case ReduceOp::argmax:
      return arg_extreme<true>(out, rows, n_rows, row_len);
    case ReduceOp::argmin:
      return arg_extreme<false>(out, rows, n_rows, row_len);
    case ReduceOp::var:
    case ReduceOp::std:
      return variance(out, rows, n_rows, row_len, correction, op == ReduceOp::std);
    case ReduceOp::logsumexp:
      // log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the row maximum, so large
      // inputs do not overflow; an infinite m is not subtracted (all -inf gives -inf, +inf
      // gives +inf).
      return TL_DISPATCH_FLOATING(rows.dtype(), "logsumexp", [&]<typename T>() {
        for_rows<T, T>(out, rows, n_rows, row_len, [](const T* p, int64_t n) {
          double m = -kInf;
          for (int64_t i = 0; i < n; ++i) m = std::max(m, convert<double>(p[i]));
          const double shift = math::lse_shift(m);
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += std::exp(convert<double>(p[i]) - shift);
          return convert<T>(math::finish_lse(m, s));
        });
      });
  }
}

// Note [Sums over leading dimensions]
// A sum over the leading dimensions of a contiguous tensor -- a bias gradient, grad.sum(0) --
// would need rows_of() to permute the reduced dimensions last and copy the whole input. Here
// the kept elements are the contiguous inner block, so column j accumulates
// x[0][j], x[1][j], ... in place: the same order as the copied rows, so the same result,
// without the copy. Returns an undefined tensor when the layout does not fit.
Tensor Kernels::sum_leading(const Tensor& x, const std::vector<bool>& reduced, bool keepdim,
                            ScalarType out_dtype) const {
  const int64_t nd = x.dim();
  int64_t k = 0;  // reduced dims are exactly [0, k)
  while (k < nd && reduced[k]) ++k;
  for (int64_t d = k; d < nd; ++d)
    if (reduced[d]) return Tensor();
  if (k == 0 || k == nd || !x.is_contiguous() || x.numel() == 0) return Tensor();
  std::vector<int64_t> out_sizes;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < k) {
      outer *= x.size(d);
      if (keepdim) out_sizes.push_back(1);
    } else {
      inner *= x.size(d);
      out_sizes.push_back(x.size(d));
    }
  }
  return TL_DISPATCH_ALL(x.dtype(), "sum", [&]<typename T>() -> Tensor {
    if constexpr (std::is_integral_v<T> || std::is_same_v<T, bool>) {
      return Tensor();  // the row path handles integer promotion and wrapping
    } else {
      if (out_dtype != x.dtype()) return Tensor();
      std::vector<wrap_acc_t<T>> acc(static_cast<size_t>(inner), wrap_acc_t<T>(0));
      const T* in = x.data_ptr<T>();
      for (int64_t i = 0; i < outer; ++i) {
        const T* row = in + i * inner;
        for (int64_t j = 0; j < inner; ++j) acc[j] += convert<acc_t<T>>(row[j]);
      }
      Tensor out = empty(out_sizes, out_dtype);
      T* o = out.data_ptr<T>();
      for (int64_t j = 0; j < inner; ++j) o[j] = convert<T>(acc[j]);
      return out;
    }
  });
}

// Softmax and log-softmax over one dim, stable: exp(x - max) / sum exp(x - max). Each outer
// slice keeps `inner` running maxima and sums, so the loops walk memory in order whichever dim
// is reduced.
void Kernels::softmax(const Tensor& out, const Tensor& in_, int64_t outer, int64_t len,
                      int64_t inner, bool log) const {
  TL_DISPATCH_FLOATING(in_.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    const T* in = in_.data_ptr<T>();
    T* o = out.data_ptr<T>();
    std::vector<double> mx(inner), sum(inner);
    for (int64_t b = 0; b < outer; ++b) {
      const T* src = in + b * len * inner;
      T* dst = o + b * len * inner;
      std::fill(mx.begin(), mx.end(), -kInf);
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t k = 0; k < len; ++k)
        for (int64_t i = 0; i < inner; ++i)
          mx[i] = std::max(mx[i], convert<double>(src[k * inner + i]));
      for (int64_t k = 0; k < len; ++k)
        for (int64_t i = 0; i < inner; ++i)
          sum[i] += std::exp(convert<double>(src[k * inner + i]) - mx[i]);
      for (int64_t k = 0; k < len; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          const double shifted = convert<double>(src[k * inner + i]) - mx[i];
          dst[k * inner + i] =
              convert<T>(log ? shifted - std::log(sum[i]) : std::exp(shifted) / sum[i]);
        }
      }
    }
  });
}

}  // namespace tl::cpu
