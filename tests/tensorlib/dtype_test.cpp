// dtypes and PyTorch's type promotion, checked against the examples in PyTorch's
// "Tensor Attributes: type promotion" documentation.
#include <gtest/gtest.h>

#include <cmath>

#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;

TEST(Dtype, HalfConversionMatchesIEEEBinary16) {
  EXPECT_EQ(tl::Half(1.0f).x, 0x3c00);
  EXPECT_EQ(tl::Half(-2.0f).x, 0xc000);
  EXPECT_EQ(tl::Half(65504.0f).x, 0x7bff);               // largest finite
  EXPECT_EQ(tl::Half(65520.0f).x, 0x7c00);               // rounds to inf
  EXPECT_EQ(tl::Half(std::ldexp(1.0f, -24)).x, 0x0001);  // smallest subnormal
  EXPECT_EQ(tl::Half(0.1f).x, 0x2e66);
  EXPECT_EQ(float(tl::Half::to_float(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(float(tl::Half::to_float(0x3555)), 0.333251953125f);
  EXPECT_TRUE(std::isnan(float(tl::Half(NAN))));
  // Every finite half round-trips through float exactly.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if (((bits >> 10) & 0x1f) == 0x1f) continue;
    float f = tl::Half::to_float(static_cast<uint16_t>(bits));
    ASSERT_EQ(tl::Half(f).x, bits) << bits;
  }
}

TEST(Dtype, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(tl::BFloat16(1.0f).x, 0x3f80);
  EXPECT_EQ(tl::BFloat16(3.140625f).x, 0x4049);
  // 1 + 2^-8 is exactly halfway between two bfloat16 values: rounds to even (1.0).
  EXPECT_EQ(tl::BFloat16(1.0f + std::ldexp(1.0f, -8)).x, 0x3f80);
  EXPECT_EQ(float(tl::BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.015625f);
}

TEST(Dtype, PromoteTypesTable) {
  using tl::promote_types;
  EXPECT_EQ(promote_types(tl::kBool, tl::kUInt8), tl::kUInt8);
  EXPECT_EQ(promote_types(tl::kUInt8, tl::kInt32), tl::kInt32);
  EXPECT_EQ(promote_types(tl::kInt32, tl::kInt64), tl::kInt64);
  EXPECT_EQ(promote_types(tl::kInt64, tl::kFloat16), tl::kFloat16);
  EXPECT_EQ(promote_types(tl::kFloat16, tl::kBFloat16), tl::kFloat32);
  EXPECT_EQ(promote_types(tl::kBFloat16, tl::kFloat64), tl::kFloat64);
  EXPECT_EQ(promote_types(tl::kFloat32, tl::kInt64), tl::kFloat32);
}

TEST(Dtype, ResultTypeFollowsPyTorchsDocumentedExamples) {
  Tensor float_tensor = tl::ones({1}, tl::kFloat32);
  Tensor double_tensor = tl::ones({1}, tl::kFloat64);
  Tensor int_tensor = tl::ones({1}, tl::kInt32);
  Tensor long_tensor = tl::ones({1}, tl::kInt64);
  Tensor uint_tensor = tl::ones({1}, tl::kUInt8);
  Tensor bool_tensor = tl::ones({1}, tl::kBool);
  Tensor long_zerodim = tl::tensor(1);
  Tensor double_zerodim = tl::tensor(1.0, tl::kFloat64);

  EXPECT_EQ((int_tensor + 5).dtype(), tl::kInt32);
  EXPECT_EQ((int_tensor + long_zerodim).dtype(), tl::kInt32);
  EXPECT_EQ((long_tensor + int_tensor).dtype(), tl::kInt64);
  EXPECT_EQ((bool_tensor + long_tensor).dtype(), tl::kInt64);
  EXPECT_EQ((bool_tensor + uint_tensor).dtype(), tl::kUInt8);
  EXPECT_EQ((float_tensor + double_tensor).dtype(), tl::kFloat64);
  EXPECT_EQ((bool_tensor + int_tensor).dtype(), tl::kInt32);
  EXPECT_EQ(tl::add(long_tensor, float_tensor).dtype(), tl::kFloat32);
  // A float scalar lifts an integer tensor to the default dtype, not to float64.
  EXPECT_EQ((int_tensor + 2.5).dtype(), tl::kFloat32);
  // A zero-dim float64 does not widen a float32 tensor (same category)...
  EXPECT_EQ((float_tensor * double_zerodim).dtype(), tl::kFloat32);
  // ...but it does lift an integer tensor, to its own type.
  EXPECT_EQ((int_tensor * double_zerodim).dtype(), tl::kFloat64);
  EXPECT_EQ((uint_tensor * -1).dtype(), tl::kUInt8);
  EXPECT_EQ((tl::ones({2}, tl::kFloat16) + tl::ones({2}, tl::kBFloat16)).dtype(), tl::kFloat32);
  // True division of integers gives the default float dtype.
  EXPECT_EQ((int_tensor / int_tensor).dtype(), tl::kFloat32);
  EXPECT_EQ((int_tensor == 1.5).dtype(), tl::kBool);
}

TEST(Dtype, InPlaceCastRulesAsPyTorch) {
  Tensor float_tensor = tl::ones({1}, tl::kFloat32);
  Tensor double_tensor = tl::ones({1}, tl::kFloat64);
  Tensor int_tensor = tl::ones({1}, tl::kInt32);
  Tensor long_tensor = tl::ones({1}, tl::kInt64);
  Tensor uint_tensor = tl::ones({1}, tl::kUInt8);
  Tensor bool_tensor = tl::ones({1}, tl::kBool);
  // Allowed.
  float_tensor *= int_tensor;
  float_tensor *= uint_tensor;
  float_tensor *= bool_tensor;
  float_tensor *= double_tensor;
  int_tensor *= long_tensor;
  int_tensor *= uint_tensor;
  uint_tensor *= int_tensor;
  EXPECT_EQ(float_tensor.dtype(), tl::kFloat32);
  // Disallowed.
  try {
    int_tensor *= float_tensor;
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_STREQ(e.what(), "result type float32 can't be cast to the desired output type int32");
  }
  EXPECT_THROW(bool_tensor *= int_tensor, tl::Error);
  EXPECT_THROW(bool_tensor *= uint_tensor, tl::Error);
  EXPECT_THROW(int_tensor.exp_(), tl::Error);
}

TEST(Dtype, ConversionsTruncateAndSaturateAsCasts) {
  Tensor f = tl::tensor({-1.7, 2.5, 0.0});
  EXPECT_TRUE(tl::equal(f.to(tl::kInt64), tl::tensor({-1, 2, 0})));
  EXPECT_TRUE(tl::equal(f.to(tl::kBool), tl::tensor({true, true, false})));
  Tensor h = f.to(tl::kFloat16);
  EXPECT_EQ(h.dtype(), tl::kFloat16);
  EXPECT_EQ(h.to(tl::kFloat32).select(0, 1).item<double>(), 2.5);
  EXPECT_EQ(tl::tensor({300}).to(tl::kUInt8).to(tl::kInt64).item<int64_t>(), 300 % 256);
}

TEST(Device, ParsesTorchStyleStrings) {
  EXPECT_TRUE(tl::Device("cpu").is_cpu());
  tl::Device d("cuda:1");
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index(), 1);
  EXPECT_EQ(d.str(), "cuda:1");
  EXPECT_EQ(tl::Device("cuda").index(), -1);
  try {
    tl::Device bad("tpu:0");
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu:0'"), std::string::npos);
  }
  EXPECT_THROW(tl::Device("cuda:x"), tl::Error);
}

}  // namespace
