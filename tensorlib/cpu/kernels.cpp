// The CPU backend's kernel table (Note [Device dispatch]), and the entry of random fills.
#include "tensorlib/cpu/kernels.h"

#include "tensorlib/core/philox.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

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

}  // namespace

void Kernels::random(const Tensor& out, const detail::RandomFill& fill) const {
  TL_DISPATCH_ALL(out.dtype(), "random",
                  [&]<typename T>() { random_fill(out.data_ptr<T>(), out.numel(), fill); });
}

}  // namespace tl::cpu
