// im2col, col2im, channel-major relayouts and gemm for the convolutions (Note [Convolution as
// one GEMM per group] in im2col.h).
#include "tensorlib/cpu/im2col.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>

#include "tensorlib/base/error.h"

namespace tl::cpu::image {
namespace {

// The output columns ow whose input column ow*stride + offset lies in [0, width): [lo, hi).
struct ValidRange {
  int64_t lo, hi;
};

ValidRange valid_range(int64_t offset, int64_t stride, int64_t width, int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = width - 1 - offset < 0 ? 0 : std::min(out, (width - 1 - offset) / stride + 1);
  lo = std::min(lo, hi);
  return {lo, hi};
}

}  // namespace

template <typename T>
void im2col(const T* img, int64_t batch, const WindowGeometry& g, T* col) {
  const int64_t L = g.positions();
  const int64_t ld = batch * L;
  const int64_t kk = g.kh * g.kw;
  parallel_items(batch * g.channels, batch * g.rows() * L, [&](int64_t item) {
    const int64_t n = item / g.channels, c = item % g.channels;
    const T* plane = img + item * g.height * g.width;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* dst = col + (c * kk + i * g.kw + j) * ld + n * L;
        const int64_t off_w = j * g.dw - g.pw;
        const ValidRange r = valid_range(off_w, g.sw, g.width, g.out_w);
        for (int64_t oh = 0; oh < g.out_h; ++oh, dst += g.out_w) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.height) {
            std::fill(dst, dst + g.out_w, T(0));
            continue;
          }
          const T* src = plane + ih * g.width;
          std::fill(dst, dst + r.lo, T(0));
          if (g.sw == 1) {
            std::memcpy(dst + r.lo, src + r.lo + off_w, (r.hi - r.lo) * sizeof(T));
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) dst[ow] = src[ow * g.sw + off_w];
          }
          std::fill(dst + r.hi, dst + g.out_w, T(0));
        }
      }
    }
  });
}

template <typename T>
void col2im(const T* col, int64_t batch, const WindowGeometry& g, T* img) {
  const int64_t L = g.positions();
  const int64_t ld = batch * L;
  const int64_t kk = g.kh * g.kw;
  parallel_items(batch * g.channels, batch * g.rows() * L, [&](int64_t item) {
    const int64_t n = item / g.channels, c = item % g.channels;
    T* plane = img + item * g.height * g.width;
    std::fill(plane, plane + g.height * g.width, T(0));
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* src = col + (c * kk + i * g.kw + j) * ld + n * L;
        const int64_t off_w = j * g.dw - g.pw;
        const ValidRange r = valid_range(off_w, g.sw, g.width, g.out_w);
        for (int64_t oh = 0; oh < g.out_h; ++oh, src += g.out_w) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.height) continue;
          T* dst = plane + ih * g.width;
          if (g.sw == 1) {
            T* d = dst + r.lo + off_w;
            const T* s = src + r.lo;
            for (int64_t k = 0; k < r.hi - r.lo; ++k) d[k] += s[k];
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) dst[ow * g.sw + off_w] += src[ow];
          }
        }
      }
    }
  });
}

template <typename T>
void to_channel_major(const T* src, int64_t batch, int64_t channels, int64_t spatial, T* dst) {
  parallel_items(batch * channels, batch * channels * spatial, [&](int64_t item) {
    const int64_t n = item / channels, c = item % channels;
    std::memcpy(dst + (c * batch + n) * spatial, src + item * spatial, spatial * sizeof(T));
  });
}

template <typename T>
void from_channel_major(const T* src, int64_t batch, int64_t channels, int64_t spatial,
                        const T* bias, T* dst) {
  parallel_items(batch * channels, batch * channels * spatial, [&](int64_t item) {
    const int64_t n = item / channels, c = item % channels;
    const T* s = src + (c * batch + n) * spatial;
    T* d = dst + item * spatial;
    if (bias) {
      const T b = bias[c];
      for (int64_t k = 0; k < spatial; ++k) d[k] = s[k] + b;
    } else {
      std::memcpy(d, s, spatial * sizeof(T));
    }
  });
}

template <typename T>
void add_row_sums(const T* m, int64_t channels, int64_t len, T* sums) {
  // Eight independent double accumulators: one long dependency chain would cost an add's
  // latency per element, and float accumulation would lose digits over 10^5 elements.
  constexpr int64_t kLanes = 8;
  for (int64_t c = 0; c < channels; ++c) {
    const T* row = m + c * len;
    double acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= len; k += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += row[k + l];
    double total = 0;
    for (; k < len; ++k) total += row[k];
    for (int64_t l = 0; l < kLanes; ++l) total += acc[l];
    sums[c] += static_cast<T>(total);
  }
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  TL_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
               ldc <= INT_MAX,
           "convolution: matrix sizes ", m, "x", k, " and ", k, "x", n,
           " exceed what BLAS can address");
  if (k == 0) {  // an empty sum: beta * c
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda),
                b, blasint(ldb), beta, c, blasint(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda),
                b, blasint(ldb), beta, c, blasint(ldc));
  }
}

#define TL_INSTANTIATE_IM2COL(T)                                                               \
  template void im2col<T>(const T*, int64_t, const WindowGeometry&, T*);                       \
  template void col2im<T>(const T*, int64_t, const WindowGeometry&, T*);                       \
  template void to_channel_major<T>(const T*, int64_t, int64_t, int64_t, T*);                  \
  template void from_channel_major<T>(const T*, int64_t, int64_t, int64_t, const T*, T*);      \
  template void add_row_sums<T>(const T*, int64_t, int64_t, T*);                               \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, \
                        int64_t, T, T*, int64_t);
TL_INSTANTIATE_IM2COL(float)
TL_INSTANTIATE_IM2COL(double)
#undef TL_INSTANTIATE_IM2COL

}  // namespace tl::cpu::image
