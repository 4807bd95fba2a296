// Where the windows of the 2-D image ops fall, device-neutral: the index and weight formulas of
// ATen's pooling and upsampling, shared by each backend's kernels (core/kernels.h, the image
// entries) and by the compositions the front-ends fall back to (Note [Separable resampling]
// in nn/unfold.cpp), so both give the same windows. Internal to tensorlib.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tl::detail {

// Upper bound on one convolution's column buffer (bytes); a batch whose columns would exceed
// it is processed in chunks of images (Note [Convolution as one GEMM per group], cpu/im2col.h).
inline constexpr int64_t kColBudgetBytes = int64_t(32) << 20;  // 32 MiB

// Images per chunk so that a column buffer of `bytes_per_image` per image stays within `budget`.
inline int64_t images_per_chunk(int64_t batch, int64_t bytes_per_image,
                                int64_t budget = kColBudgetBytes) {
  const int64_t fit = budget / std::max<int64_t>(1, bytes_per_image);
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(1, batch));
}

// One axis of an average-pooling window: its range [lo, hi) clipped to the input, and its
// length within the padded input (the count_include_pad divisor's factor).
struct AvgSpan {
  int64_t lo, hi, padded;
};

inline AvgSpan avg_span(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t lo = o * stride - pad, hi = std::min(lo + kernel, in + pad);
  return {std::max<int64_t>(lo, 0), std::min(hi, in), hi - lo};
}

// Adaptive pooling's window along one axis (ATen's start_index / end_index):
// [floor(i * in / out), ceil((i + 1) * in / out)).
inline int64_t adaptive_start(int64_t i, int64_t out, int64_t in) {
  return (i * in) / out;
}
inline int64_t adaptive_end(int64_t i, int64_t out, int64_t in) {
  return ((i + 1) * in + out - 1) / out;
}

// What one output size and its optional scale factor mean for upsampling along an axis.
struct AxisScale {
  int64_t in, out;
  std::optional<double> scale_factor;  // passed on unless recomputed (ATen's `scales`)
};

// ATen's nearest_idx: the input index each output index reads (the scale a float for every
// dtype).
inline std::vector<int64_t> nearest_indices(const AxisScale& a) {
  std::vector<int64_t> idx(static_cast<size_t>(a.out));
  const float scale = a.scale_factor && *a.scale_factor > 0
                          ? static_cast<float>(1.0 / *a.scale_factor)
                          : static_cast<float>(a.in) / static_cast<float>(a.out);
  for (int64_t i = 0; i < a.out; ++i) {
    if (a.out == a.in) {
      idx[i] = i;
    } else if (a.out == 2 * a.in) {
      idx[i] = i >> 1;
    } else {
      idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * scale)), a.in - 1);
    }
  }
  return idx;
}

// Bilinear taps along one axis: output i = lambda0 * in[i0] + lambda1 * in[i0 + offset].
template <typename T>
struct LinearTaps {
  std::vector<int64_t> i0, offset;
  std::vector<T> lambda0, lambda1;
};

// ATen's area_pixel_compute_scale / area_pixel_compute_source_index /
// compute_source_index_and_lambda, in the type T the kernel computes in.
template <typename T>
LinearTaps<T> linear_taps(const AxisScale& a, bool align_corners) {
  const auto n = static_cast<size_t>(a.out);
  LinearTaps<T> t{std::vector<int64_t>(n), std::vector<int64_t>(n), std::vector<T>(n),
                  std::vector<T>(n)};
  T scale;
  if (align_corners) {
    scale = a.out > 1 ? static_cast<T>(a.in - 1) / static_cast<T>(a.out - 1) : T(0);
  } else {
    scale = a.scale_factor && *a.scale_factor > 0 ? static_cast<T>(1.0 / *a.scale_factor)
                                                  : static_cast<T>(a.in) / static_cast<T>(a.out);
  }
  for (int64_t i = 0; i < a.out; ++i) {
    if (a.out == a.in) {
      t.i0[i] = i;
      t.offset[i] = 0;
      t.lambda0[i] = 1;
      t.lambda1[i] = 0;
      continue;
    }
    T src =
        align_corners ? scale * static_cast<T>(i) : scale * (static_cast<T>(i) + T(0.5)) - T(0.5);
    if (!align_corners && src < T(0)) src = T(0);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), a.in - 1);
    const T lambda1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
    t.i0[i] = i0;
    t.offset[i] = i0 < a.in - 1 ? 1 : 0;
    t.lambda1[i] = lambda1;
    t.lambda0[i] = T(1) - lambda1;
  }
  return t;
}

}  // namespace tl::detail
