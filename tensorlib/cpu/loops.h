// Strided N-ary iteration for CPU kernels (internal to tensorlib).
//
// Operands are first broadcast to one shape (expand gives stride 0), then dims that are
// contiguous with each other in *every* operand are coalesced, so a contiguous or
// broadcast-scalar op runs as one flat inner loop that the compiler vectorises. Kernels see
// rows: `f(char** ptrs, const int64_t* byte_strides, int64_t n)`.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tensorlib/core/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tl::cpu {

inline constexpr size_t kMaxDims = 64;

// Note [Intra-op parallelism]
// Like ATen's at::parallel_for: ranges of at least kGrainSize elements per thread are split
// across the OpenMP threads (OMP_NUM_THREADS, default one per core); smaller work stays on the
// calling thread. Memory-bound elementwise ops on large tensors gain the most.
inline constexpr int64_t kGrainSize = 32768;

// Calls f(begin, end) over [0, n), possibly from several threads at once.
template <typename F>
void parallel_for(int64_t n, F&& f) {
#ifdef _OPENMP
  int max_threads = omp_get_max_threads();
  if (n >= 2 * kGrainSize && max_threads > 1 && !omp_in_parallel()) {
    int64_t threads = std::min<int64_t>(max_threads, n / kGrainSize);
#pragma omp parallel num_threads(static_cast <int>(threads))
    {
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t b = t * chunk, e = std::min(n, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  if (n > 0) f(int64_t(0), n);
}

template <size_t N>
class StridedIter {
 public:
  // All operands must already have `shape` (views via expand are fine). ops[0] is usually
  // the output.
  StridedIter(IntArrayRef shape, const std::array<const Tensor*, N>& ops) {
    const size_t nd = shape.size();
    TL_CHECK(nd <= kMaxDims, "tensors with more than ", kMaxDims,
             " dimensions are not supported, got ", nd);
    numel_ = 1;
    for (auto s : shape) numel_ *= s;
    for (size_t k = 0; k < N; ++k) {
      const Tensor& t = *ops[k];
      data_[k] = static_cast<char*>(t.data_ptr());
      elem_[k] = static_cast<int64_t>(t.element_size());
    }
    // Build dims innermost-first, dropping size-1 dims, merging where every operand allows.
    for (size_t i = nd; i-- > 0;) {
      if (shape[i] == 1) continue;
      std::array<int64_t, N> st;
      for (size_t k = 0; k < N; ++k) st[k] = ops[k]->strides()[i] * elem_[k];
      if (!sizes_.empty()) {
        bool merge = true;
        for (size_t k = 0; k < N; ++k)
          if (st[k] != strides_.back()[k] * sizes_.back()) merge = false;
        if (merge) {
          sizes_.back() *= shape[i];
          continue;
        }
      }
      sizes_.push_back(shape[i]);
      strides_.push_back(st);
    }
    if (sizes_.empty()) {  // 0-dim or all size-1: one element
      sizes_.push_back(1);
      strides_.push_back({});
      for (size_t k = 0; k < N; ++k) strides_.back()[k] = elem_[k];
    }
  }

  int64_t numel() const { return numel_; }
  // True when the innermost run of operand k is densely packed.
  bool inner_contiguous(size_t k) const { return strides_[0][k] == elem_[k]; }

  // Calls f on every row of the elements [begin, end) of the coalesced iteration space, in
  // order, on the calling thread.
  template <typename F>
  void for_range(int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    const size_t nd = sizes_.size();
    const int64_t inner_n = sizes_[0];
    const int64_t* inner = strides_[0].data();
    // Decompose `begin` into an index: the offset within its row, then the row's index.
    std::array<int64_t, kMaxDims> idx{};
    std::array<char*, N> ptrs = data_;
    idx[0] = begin % inner_n;
    int64_t row = begin / inner_n;
    for (size_t d = 1; d < nd; ++d) {
      idx[d] = row % sizes_[d];
      row /= sizes_[d];
    }
    for (size_t d = 0; d < nd; ++d)
      for (size_t k = 0; k < N; ++k) ptrs[k] += idx[d] * strides_[d][k];
    int64_t remaining = end - begin;
    while (remaining > 0) {
      int64_t n = std::min(inner_n - idx[0], remaining);
      f(ptrs.data(), inner, n);
      remaining -= n;
      if (remaining == 0) break;
      // Back to the start of the row, then advance the outer index odometer-style.
      for (size_t k = 0; k < N; ++k) ptrs[k] -= idx[0] * strides_[0][k];
      idx[0] = 0;
      for (size_t d = 1; d < nd; ++d) {
        if (++idx[d] < sizes_[d]) {
          for (size_t k = 0; k < N; ++k) ptrs[k] += strides_[d][k];
          break;
        }
        for (size_t k = 0; k < N; ++k) ptrs[k] -= strides_[d][k] * (sizes_[d] - 1);
        idx[d] = 0;
      }
    }
  }

  template <typename F>
  void for_each_row(F&& f) const {
    for_range(0, numel_, f);
  }

  // As for_each_row, split across threads when large (`f` must only write its own
  // elements: elementwise kernels and fills).
  template <typename F>
  void parallel_for_each_row(F&& f) const {
    parallel_for(numel_, [&](int64_t b, int64_t e) { for_range(b, e, f); });
  }

 private:
  std::vector<int64_t> sizes_;                   // innermost first
  std::vector<std::array<int64_t, N>> strides_;  // bytes, innermost first
  std::array<char*, N> data_;
  std::array<int64_t, N> elem_;
  int64_t numel_ = 1;
};

// out[i] = f(a[i]) with out of type O and a of type A.
template <typename O, typename A, typename F>
void unary_kernel(const Tensor& out, const Tensor& a, F f) {
  StridedIter<2> it(out.sizes(), {&out, &a});
  it.parallel_for_each_row([&](char** p, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(O) && s[1] == sizeof(A)) {
      O* o = reinterpret_cast<O*>(p[0]);
      const A* x = reinterpret_cast<const A*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]));
    }
  });
}

// out[i] = f(a[i], b[i]).
template <typename O, typename A, typename B, typename F>
void binary_kernel(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  StridedIter<3> it(out.sizes(), {&out, &a, &b});
  it.parallel_for_each_row([&](char** p, const int64_t* s, int64_t n) {
    O* o = reinterpret_cast<O*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const B* y = reinterpret_cast<const B*>(p[2]);
    if (s[0] == sizeof(O) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(O) && s[1] == sizeof(A) && s[2] == 0) {
      const B yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                   *reinterpret_cast<const B*>(p[2] + i * s[2]));
    }
  });
}

// out[i] = f(a[i], b[i], c[i]).
template <typename O, typename A, typename B, typename C, typename F>
void ternary_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  StridedIter<4> it(out.sizes(), {&out, &a, &b, &c});
  it.parallel_for_each_row([&](char** p, const int64_t* s, int64_t n) {
    O* o = reinterpret_cast<O*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const B* y = reinterpret_cast<const B*>(p[2]);
    const C* z = reinterpret_cast<const C*>(p[3]);
    if (s[0] == sizeof(O) && s[1] == sizeof(A) && s[2] == sizeof(B) && s[3] == sizeof(C)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], z[i]);
      return;
    }
    if (s[0] == sizeof(O) && s[1] == sizeof(A) && s[2] == sizeof(B) && s[3] == 0) {
      const C zv = *z;  // where(mask, t, scalar): ReLU's backward
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], zv);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<O*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                 *reinterpret_cast<const B*>(p[2] + i * s[2]),
                                                 *reinterpret_cast<const C*>(p[3] + i * s[3]));
  });
}

// Converts one element between the supported C++ types with PyTorch's semantics (through
// float for the 16-bit floats; to bool means != 0).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<opmath_t<From>>(v) != opmath_t<From>(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(static_cast<opmath_t<From>>(v)));
  } else {
    return static_cast<To>(static_cast<opmath_t<From>>(v));
  }
}

}  // namespace tl::cpu
