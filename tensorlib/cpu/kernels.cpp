// The CPU backend's kernel table (Note [Device dispatch]), and the entries of ops whose CPU
// loops are small: random fills, im2col/col2im.
#include "tensorlib/cpu/kernels.h"

#include "tensorlib/core/philox.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"
#include "tensorlib/nn/im2col.h"
#include "tensorlib/nn/image_util.h"

namespace tl::cpu {

const detail::Kernels& kernels() {
  static const Kernels table;
  return table;
}

namespace {

// The CPU loop of Note [Counter-based random tensors] (core/philox.h): element i from counter
// first + i / per_counter, with the formulas the CUDA kernel shares.
template <typename T>
void random_fill(T* p, int64_t n, const detail::RandomFill& f) {
  using random::philox_block;
  if (f.dist == detail::RandomDist::integer) {
    for (int64_t i = 0; i < n; i += 2) {
      const random::Words4 r = philox_block(f.seed, f.offset + static_cast<uint64_t>(i / 2));
      for (int64_t k = 0; k < 2 && i + k < n; ++k)
        p[i + k] = convert<T>(random::uniform_int(r.w[2 * k], r.w[2 * k + 1], f.low, f.range));
    }
    return;
  }
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                std::is_same_v<T, BFloat16>) {
    const int bits = random::uniform_bits_for(sizeof(T), std::is_same_v<T, BFloat16>);
    for (int64_t i = 0; i < n; i += 4) {
      const random::Words4 r = philox_block(f.seed, f.offset + static_cast<uint64_t>(i / 4));
      double z[4];
      if (f.dist == detail::RandomDist::uniform) {
        for (int k = 0; k < 4; ++k) z[k] = random::uniform_bits<double>(r.w[k], bits);
      } else {
        random::box_muller<double>(r.w[0], r.w[1], z[0], z[1]);
        random::box_muller<double>(r.w[2], r.w[3], z[2], z[3]);
      }
      for (int64_t k = 0; k < 4 && i + k < n; ++k) p[i + k] = convert<T>(z[k]);
    }
  }
}

nn::detail::WindowGeometry geometry_of(const detail::Window2d& w) {
  return {w.channels, w.height, w.width, w.kh, w.kw, w.sh, w.sw,
          w.ph,       w.pw,     w.dh,    w.dw, w.out_h, w.out_w};
}

}  // namespace

void Kernels::random(const Tensor& out, const detail::RandomFill& fill) const {
  TL_DISPATCH_ALL(out.dtype(), "random", [&]<typename T>() {
    random_fill(out.data_ptr<T>(), out.numel(), fill);
  });
}

// One image at a time (a one-image CPU column buffer has the CUDA layout [C*kh*kw, L]); the
// CPU pads with 0 only (the composed image ops run here only in tests, Note [Separable
// resampling]).
void Kernels::im2col(const Tensor& cols, const Tensor& img, const detail::Window2d& w,
                     double pad) const {
  TL_INTERNAL_ASSERT(pad == 0.0);
  const nn::detail::WindowGeometry g = geometry_of(w);
  nn::detail::dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t image = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      nn::detail::im2col<T>(img.data_ptr<T>() + n * image, 1, g, cols.data_ptr<T>() + n * col);
  });
}

void Kernels::col2im(const Tensor& img, const Tensor& cols, const detail::Window2d& w) const {
  const nn::detail::WindowGeometry g = geometry_of(w);
  nn::detail::dispatch_floating(img.dtype(), [&]<typename T>() {
    const int64_t image = w.channels * w.height * w.width, col = g.rows() * g.positions();
    for (int64_t n = 0; n < w.batch; ++n)
      nn::detail::col2im<T>(cols.data_ptr<T>() + n * col, 1, g, img.data_ptr<T>() + n * image);
  });
}

}  // namespace tl::cpu
