// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so element i of a random tensor depends only on (seed, offset + i)
// and results are reproducible whatever the iteration order or thread count.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace tl {

class PhiloxGenerator {
 public:
  explicit PhiloxGenerator(uint64_t seed = 67280421310721ull) { set_seed(seed); }

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

  // Four 32-bit random numbers for counter `c` under key `seed`.
  static std::array<uint32_t, 4> block(uint64_t seed, uint64_t c) {
    return philox({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0, 0},
                  {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  }

  // The Philox 4x32-10 bijection itself.
  static std::array<uint32_t, 4> philox(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(kMul0) * ctr[0];
      uint64_t p1 = uint64_t(kMul1) * ctr[2];
      ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
             static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    return ctr;
  }

 private:
  static constexpr uint32_t kMul0 = 0xD2511F53u;
  static constexpr uint32_t kMul1 = 0xCD9E8D57u;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9u;
  static constexpr uint32_t kWeyl1 = 0xBB67AE85u;

  std::mutex mutex_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

PhiloxGenerator& default_generator();

}  // namespace tl
