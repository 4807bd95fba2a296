// The mergeable partials of var/std and logsumexp, written once for both backends: a CUDA
// reduction that splits a long row into chunks (Note [Split full reductions] in
// cuda/reduce.cu) reduces each chunk to a RowMoments and merges them in chunk order, and the
// CPU tests check these merges against the CPU's one-pass-per-row results.
//
// A chunk is reduced in two passes over its elements, as a whole row is:
// * var/std: `first` the chunk's mean, `second` the sum of squared deviations from it (M2).
//   Merged with Chan et al.'s pairwise update, which keeps the two-pass accuracy (no
//   sum-of-squares cancellation) however far the mean is from zero.
// * logsumexp: `first` the chunk's maximum (NaN if it holds one), `second` the sum of
//   exp(x - lse_shift(first)). Merged by rescaling both sums to the larger maximum.
#pragma once

#include <cstdint>

#include "tensorlib/core/elementwise_math.h"

namespace tl::math {

template <typename M>
struct RowMoments {
  M first;
  M second;
  int64_t n;
};

/// The larger of x and y, NaN if either is (x's NaN first), as the row kernels' maximum.
template <typename M>
TL_HOST_DEVICE inline M nan_max(M x, M y) {
  return x > y || x != x ? x : y;
}

/// What logsumexp subtracts before exponentiating: the maximum, or 0 when it is infinite (a
/// row of -inf sums to 0 and gives -inf; a +inf gives +inf).
template <typename M>
TL_HOST_DEVICE inline M lse_shift(M max) {
  return max == M(INFINITY) || max == M(-INFINITY) ? M(0) : max;
}

/// The moments of a ++ b for var/std (both non-empty chunks, or an empty `a`).
template <typename M>
TL_HOST_DEVICE inline RowMoments<M> merge_var(const RowMoments<M>& a, const RowMoments<M>& b) {
  if (a.n == 0) return b;
  if (b.n == 0) return a;
  const int64_t n = a.n + b.n;
  const M delta = b.first - a.first;
  const M wb = M(b.n) / M(n);
  return {a.first + delta * wb, a.second + b.second + delta * delta * M(a.n) * wb, n};
}

/// The moments of a ++ b for logsumexp.
template <typename M>
TL_HOST_DEVICE inline RowMoments<M> merge_lse(const RowMoments<M>& a, const RowMoments<M>& b) {
  if (a.n == 0) return b;
  if (b.n == 0) return a;
  const M max = nan_max(a.first, b.first);
  const M shift = lse_shift(max);
  // A sum of 0 (a chunk of -inf) stays 0 even where exp(its shift - shift) overflows.
  auto rescaled = [shift](const RowMoments<M>& c) {
    return c.second == M(0) ? M(0) : c.second * exp_(lse_shift(c.first) - shift);
  };
  return {max, rescaled(a) + rescaled(b), a.n + b.n};
}

/// var (or std) of a row of n elements from its M2, with Bessel's `correction` as the CPU:
/// NaN for an empty row, and for n <= correction NaN when M2 is 0 or NaN, else +inf.
template <typename M>
TL_HOST_DEVICE inline M finish_var(M m2, int64_t n, int64_t correction, bool take_sqrt) {
  const int64_t denom = n - correction > 0 ? n - correction : 0;
  M r = n == 0      ? M(NAN)
        : denom > 0 ? m2 / M(denom)
                    : (m2 == M(0) || m2 != m2 ? M(NAN) : M(INFINITY));
  return take_sqrt ? sqrt_(r) : r;
}

/// logsumexp of a row from its maximum and its sum of exp(x - lse_shift(max)).
template <typename M>
TL_HOST_DEVICE inline M finish_lse(M max, M sum) {
  return log_(sum) + lse_shift(max);
}

}  // namespace tl::math
