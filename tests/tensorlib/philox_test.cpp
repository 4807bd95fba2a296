// Philox 4x32-10 and the random factories' counter layout (core/philox.h): the formulas the
// CPU loops and the CUDA kernel share, checked here on the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include <tensorlib/core/generator.h>
#include <tensorlib/core/philox.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::random::Words4;

// Random123's kat_vectors, the three "philox4x32 10" lines: counter, key, expected output.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    Words4 ctr;
    uint32_t k0, k1;
    Words4 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Words4 got = tl::random::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.w[i], k.want.w[i]) << "word " << i;
  }
}

TEST(Philox, BlockPutsTheCounterInTheLowWordsAndTheSeedInTheKey) {
  const uint64_t seed = 0x299f31d0a4093822ull, c = 0x85a308d3243f6a88ull;
  const Words4 direct =
      tl::random::philox4x32_10(Words4{{0x243f6a88, 0x85a308d3, 0, 0}}, 0xa4093822, 0x299f31d0);
  const auto block = tl::PhiloxGenerator::block(seed, c);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(block[i], direct.w[i]);
}

TEST(Philox, UniformsStayBelowOneAndNormalsFinite) {
  for (int bits : {8, 11, 24, 32}) {
    EXPECT_LT(tl::random::uniform_bits<double>(0xffffffffu, bits), 1.0);
    EXPECT_EQ(tl::random::uniform_bits<float>(0u, bits), 0.0f);
  }
  EXPECT_LT(tl::random::uniform_bits<float>(0xffffffffu, 24), 1.0f);
  EXPECT_EQ(tl::random::uniform_bits<float>(0x80000000u, 24), 0.5f);
  for (uint32_t a : {0u, 1u, 0x80000000u, 0xffffffffu}) {
    float f0, f1;
    double d0, d1;
    tl::random::box_muller<float>(a, a, f0, f1);
    tl::random::box_muller<double>(a, a, d0, d1);
    EXPECT_TRUE(std::isfinite(f0) && std::isfinite(f1) && std::isfinite(d0) && std::isfinite(d1));
    EXPECT_NEAR(f0, d0, 1e-4 * (1 + std::fabs(d0)));  // float compute (the GPU's) vs double
  }
  EXPECT_EQ(tl::random::uniform_int(0, 7, -3, 5), -3 + 7 % 5);
  EXPECT_EQ(tl::random::uniform_int(1, 0, 0, 3), static_cast<int64_t>((uint64_t(1) << 32) % 3));
}

// The contract the CUDA kernel follows too: element i comes from counter offset + i / 4 (2 for
// randint), so the values depend neither on the thread count nor on the launch shape.
TEST(Philox, FactoriesFollowTheCounterLayout) {
  tl::manual_seed(77);
  const tl::Tensor u = tl::rand({9});
  const tl::Tensor z = tl::randn({6}, tl::kFloat64);
  const tl::Tensor r = tl::randint(-5, 1000, {5});
  // rand took counters 0..2, randn 3..4, randint 5..7.
  for (int64_t i = 0; i < 9; ++i) {
    const Words4 w = tl::random::philox_block(77, static_cast<uint64_t>(i / 4));
    EXPECT_EQ(u.data_ptr<float>()[i], tl::random::uniform_bits<float>(w.w[i % 4], 24)) << i;
  }
  for (int64_t i = 0; i < 6; i += 2) {
    const Words4 w = tl::random::philox_block(77, 3 + static_cast<uint64_t>(i / 4));
    double z0, z1;
    tl::random::box_muller<double>(w.w[i % 4], w.w[i % 4 + 1], z0, z1);
    EXPECT_EQ(z.data_ptr<double>()[i], z0);
    EXPECT_EQ(z.data_ptr<double>()[i + 1], z1);
  }
  for (int64_t i = 0; i < 5; ++i) {
    const Words4 w = tl::random::philox_block(77, 5 + static_cast<uint64_t>(i / 2));
    EXPECT_EQ(r.data_ptr<int64_t>()[i],
              tl::random::uniform_int(w.w[2 * (i % 2)], w.w[2 * (i % 2) + 1], -5, 1005));
  }
}

TEST(Philox, EachDeviceHasItsOwnGeneratorAndManualSeedResetsAll) {
  tl::manual_seed(11);
  tl::PhiloxGenerator& cpu = tl::default_generator(tl::Device(tl::kCPU));
  tl::PhiloxGenerator& cuda0 = tl::default_generator(tl::Device("cuda:0"));
  EXPECT_EQ(&cpu, &tl::default_generator());
  EXPECT_NE(&cpu, &cuda0);
  EXPECT_EQ(&cuda0, &tl::default_generator(tl::Device("cuda")));  // the index resolves to 0
  EXPECT_EQ(cuda0.seed(), 11u);
  cuda0.reserve(10);  // a CUDA draw does not move the CPU's stream
  EXPECT_EQ(cpu.reserve(0), 0u);
  tl::manual_seed(12);
  EXPECT_EQ(cuda0.seed(), 12u);
  EXPECT_EQ(cuda0.reserve(0), 0u);
  EXPECT_EQ(tl::default_generator(tl::Device("cuda:3")).seed(), 12u);  // made after the seed
}

}  // namespace
