// The state of a Philox 4x32-10 stream (Note [Counter-based random tensors] in core/philox.h):
// a seed (the key) and the next unused counter, so element i of a random tensor depends only
// on (seed, offset + i / per_counter) and results are reproducible whatever the iteration
// order, thread count or launch shape.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "tensorlib/base/device.h"
#include "tensorlib/core/philox.h"

namespace tl {

inline constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default_rng_seed_val

class PhiloxGenerator {
 public:
  explicit PhiloxGenerator(uint64_t seed = kDefaultSeed) { set_seed(seed); }

  void set_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }

  // Reserves `n` counters (each yields four 32-bit numbers); returns the first.
  uint64_t reserve(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }

  // Four 32-bit random numbers for counter `c` under key `seed` (core/philox.h).
  static std::array<uint32_t, 4> block(uint64_t seed, uint64_t c) {
    const random::Words4 r = random::philox_block(seed, c);
    return {r.w[0], r.w[1], r.w[2], r.w[3]};
  }

 private:
  std::mutex mutex_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

/// The CPU's generator.
PhiloxGenerator& default_generator();
/// The generator of `device`: the CPU's, or one per CUDA device, created on first use with the
/// last tl::manual_seed (kDefaultSeed before any). tl::manual_seed reseeds all of them.
PhiloxGenerator& default_generator(Device device);

}  // namespace tl
