// Philox 4x32-10 and the transforms of tensorlib's random factories, written once for both
// backends (TL_HOST_DEVICE, as core/elementwise_math.h).
//
// Note [Counter-based random tensors]
// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) maps a
// 128-bit counter and a 64-bit key to four 32-bit words. A random factory reserves counters
// from its device's generator (PhiloxGenerator: the seed is the key, the offset the next
// unused counter, advanced by every call, as PyTorch's CUDA generator advances its offset per
// launch) and element i of the result is a function of (seed, offset + i / per_counter) only:
//   rand    4 elements per counter, element i the word i % 4 (`uniform_bits`);
//   randn   4 elements per counter, Box-Muller on the words (0, 1) and (2, 3);
//   randint 2 elements per counter, element i the 64-bit word pair (2k, 2k + 1), k = i % 2.
// So the values do not depend on the launch shape or the thread count, the CPU loop and the
// CUDA kernel compute the same numbers (rand and randint bit for bit; randn up to the math
// library's ulps, the device computing float dtypes in float), and tl::manual_seed makes both
// reproducible. CPU and CUDA devices have separate generators (`default_generator(device)`),
// so drawing on one does not shift the other's stream, as in PyTorch.
#pragma once

#include <cstdint>

#include "tensorlib/core/elementwise_math.h"  // TL_HOST_DEVICE, math::log_ and friends

namespace tl::random {

struct Words4 {
  uint32_t w[4];
};

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // the key's Weyl increments
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

/// The Philox 4x32-10 bijection of Random123 (philox4x32_R with R = 10): ten rounds, the key
/// bumped between rounds.
TL_HOST_DEVICE inline Words4 philox4x32_10(Words4 ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kPhiloxW0;
      key1 += kPhiloxW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr.w[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr.w[2];
    ctr = Words4{{static_cast<uint32_t>(p1 >> 32) ^ ctr.w[1] ^ key0, static_cast<uint32_t>(p1),
                  static_cast<uint32_t>(p0 >> 32) ^ ctr.w[3] ^ key1, static_cast<uint32_t>(p0)}};
  }
  return ctr;
}

/// The four words of counter `c` (low word first, high 64 bits zero) under key `seed`.
TL_HOST_DEVICE inline Words4 philox_block(uint64_t seed, uint64_t c) {
  return philox4x32_10(Words4{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0, 0}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// rand's bits per element: as many as the dtype's significand holds (double 32, float 24,
/// half 11, bfloat16 8), so no value rounds up to 1.
TL_HOST_DEVICE constexpr int uniform_bits_for(int element_bytes, bool is_bfloat16) {
  return element_bytes == 8 ? 32 : element_bytes == 4 ? 24 : is_bfloat16 ? 8 : 11;
}

/// A uniform draw in [0, 1) from the top `bits` bits of `r`: exact in M (float or double).
template <typename M>
TL_HOST_DEVICE inline M uniform_bits(uint32_t r, int bits) {
  const uint32_t top = r >> (32 - bits);
  // 2^-bits, exact for every bits <= 32 in both float and double.
  return static_cast<M>(top) * (static_cast<M>(1) / static_cast<M>(uint64_t(1) << bits));
}

/// Box-Muller's uniform in (0, 1]: never 0, so the log is finite.
template <typename M>
TL_HOST_DEVICE inline M uniform_open0(uint32_t x) {
  return (static_cast<M>(x) + static_cast<M>(0.5)) *
         (static_cast<M>(1) / static_cast<M>(4294967296.0));
}

/// Two standard normals from two words (Box-Muller), computed in M.
template <typename M>
TL_HOST_DEVICE inline void box_muller(uint32_t a, uint32_t b, M& z0, M& z1) {
  constexpr M kTwoPi = static_cast<M>(6.283185307179586476925286766559);
  const M radius = math::sqrt_(static_cast<M>(-2) * math::log_(uniform_open0<M>(a)));
  const M theta = kTwoPi * uniform_open0<M>(b);
  z0 = radius * math::cos_(theta);
  z1 = radius * math::sin_(theta);
}

/// randint's draw: low + (a 64-bit word pair) mod range.
TL_HOST_DEVICE inline int64_t uniform_int(uint32_t hi, uint32_t lo, int64_t low, uint64_t range) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return low + static_cast<int64_t>(x % range);
}

}  // namespace tl::random
