// int8 and int16 (torch.int8 / torch.int16) and the 16-bit floats' arithmetic on the CPU, with
// PyTorch's semantics: its promotion table (torch.promote_types, torch.result_type), integer
// arithmetic that wraps, and 16-bit float ops computed in float32 and rounded once per op.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <tensorlib/nn/serialize.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;

template <typename T>
std::vector<T> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

TEST(SmallIntegers, SizesAndNames) {
  EXPECT_EQ(tl::element_size(tl::kInt8), 1u);
  EXPECT_EQ(tl::element_size(tl::kInt16), 2u);
  EXPECT_EQ(tl::dtype_name(tl::kInt8), "int8");
  EXPECT_EQ(tl::dtype_name(tl::kInt16), "int16");
  EXPECT_EQ(tl::kChar, tl::kInt8);
  EXPECT_EQ(tl::kShort, tl::kInt16);
}

TEST(SmallIntegers, PrintAsNumbers) {
  // int8_t is a char to iostreams: the elements must still print as numbers.
  EXPECT_EQ(tl::tensor({-3, 65}, tl::kInt8).toString(), "tensor([-3, 65], dtype=tl.int8)");
  EXPECT_EQ(tl::tensor({-300, 7}, tl::kInt16).toString(), "tensor([-300,    7], dtype=tl.int16)");
}

TEST(SmallIntegers, PromoteTypesAsPyTorch) {
  using tl::promote_types;
  // torch.promote_types
  EXPECT_EQ(promote_types(tl::kInt8, tl::kUInt8), tl::kInt16);
  EXPECT_EQ(promote_types(tl::kUInt8, tl::kInt8), tl::kInt16);
  EXPECT_EQ(promote_types(tl::kInt8, tl::kInt16), tl::kInt16);
  EXPECT_EQ(promote_types(tl::kUInt8, tl::kInt16), tl::kInt16);
  EXPECT_EQ(promote_types(tl::kBool, tl::kInt8), tl::kInt8);
  EXPECT_EQ(promote_types(tl::kInt16, tl::kInt32), tl::kInt32);
  EXPECT_EQ(promote_types(tl::kInt8, tl::kInt64), tl::kInt64);
  EXPECT_EQ(promote_types(tl::kInt8, tl::kFloat16), tl::kFloat16);
  EXPECT_EQ(promote_types(tl::kInt16, tl::kBFloat16), tl::kBFloat16);
  EXPECT_EQ(promote_types(tl::kInt16, tl::kFloat32), tl::kFloat32);
}

TEST(SmallIntegers, ResultTypeAsPyTorch) {
  const Tensor i8 = tl::ones({2}, tl::kInt8), i16 = tl::ones({2}, tl::kInt16);
  const Tensor u8 = tl::ones({2}, tl::kUInt8);
  EXPECT_EQ((i8 + u8).dtype(), tl::kInt16);
  EXPECT_EQ((i8 + i16).dtype(), tl::kInt16);
  // A Python int does not widen an integer tensor; a zero-dim int64 tensor does not either.
  EXPECT_EQ((i8 + 1000).dtype(), tl::kInt8);
  EXPECT_EQ((i16 * tl::tensor(3)).dtype(), tl::kInt16);
  EXPECT_EQ((i8 + 2.5).dtype(), tl::kFloat32);
  EXPECT_EQ((i8 / i8).dtype(), tl::kFloat32);
  EXPECT_EQ((i16 < 3).dtype(), tl::kBool);
  EXPECT_EQ(i8.sum().dtype(), tl::kInt64);
}

TEST(SmallIntegers, ArithmeticWrapsAsTwosComplement) {
  // torch.tensor([127, -128, 100], dtype=torch.int8) + 1 == [-128, -127, 101]
  const Tensor a = tl::tensor({127, -128, 100}, tl::kInt8);
  EXPECT_EQ(values<int8_t>(a + 1), (std::vector<int8_t>{-128, -127, 101}));
  // * 3: [381, -384, 300] mod 256 -> [125, -128, 44]
  EXPECT_EQ(values<int8_t>(a * 3), (std::vector<int8_t>{125, -128, 44}));
  EXPECT_EQ(values<int8_t>(-a), (std::vector<int8_t>{-127, -128, -100}));
  const Tensor b = tl::tensor({32767, -32768}, tl::kInt16);
  EXPECT_EQ(values<int16_t>(b + 1), (std::vector<int16_t>{-32768, -32767}));
  // Sums accumulate in int64: no wrap at the element type.
  EXPECT_EQ(a.sum().item<int64_t>(), 99);
  EXPECT_EQ(b.sum().item<int64_t>(), -1);
  // True division and conversion from floats (truncation toward zero).
  EXPECT_EQ(values<float>(tl::tensor({7, -7}, tl::kInt8) / 2), (std::vector<float>{3.5f, -3.5f}));
  EXPECT_EQ(values<int16_t>(tl::tensor({3.7, -3.7}).to(tl::kInt16)), (std::vector<int16_t>{3, -3}));
}

TEST(SmallIntegers, IndexingReductionsAndProducts) {
  const Tensor a = tl::tensor({{1, -2, 3}, {4, 5, -6}}, tl::kInt8);
  EXPECT_EQ(values<int8_t>(std::get<0>(a.max(1))), (std::vector<int8_t>{3, 5}));
  EXPECT_EQ(values<int64_t>(a.argmin(1)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(values<int8_t>(a.index_select(1, tl::tensor({int64_t{2}, int64_t{0}}))),
            (std::vector<int8_t>{3, 1, -6, 4}));
  EXPECT_EQ(values<int8_t>(a.matmul(a.t())), (std::vector<int8_t>{14, -24, -24, 77}));
  Tensor z = tl::zeros({3}, tl::kInt16);
  z.scatter_add_(0, tl::tensor({int64_t{0}, int64_t{0}, int64_t{2}}),
                 tl::tensor({300, 400, -5}, tl::kInt16));
  EXPECT_EQ(values<int16_t>(z), (std::vector<int16_t>{700, 0, -5}));
}

TEST(SmallIntegers, SafetensorsKeepsTheDtype) {
  const std::string path = "/tmp/tl_small_dtypes_" + std::to_string(::getpid()) + ".safetensors";
  tl::nn::save_safetensors(
      {{"a", tl::tensor({-3, 4}, tl::kInt8)}, {"b", tl::tensor({-300}, tl::kInt16)}}, path);
  auto loaded = tl::nn::load_safetensors(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.at("a").dtype(), tl::kInt8);
  EXPECT_EQ(loaded.at("b").dtype(), tl::kInt16);
  EXPECT_EQ(values<int8_t>(loaded.at("a")), (std::vector<int8_t>{-3, 4}));
  EXPECT_EQ(values<int16_t>(loaded.at("b")), (std::vector<int16_t>{-300}));
}

// Each op computes in float32 and rounds its result once to the 16-bit type (PyTorch's CPU
// kernels); the expected numbers are PyTorch's.
TEST(SixteenBitFloats, EachOpRoundsOnce) {
  auto h = [](std::initializer_list<double> v) {
    return tl::tensor(std::vector<double>(v), tl::kFloat16);
  };
  auto bf = [](std::initializer_list<double> v) {
    return tl::tensor(std::vector<double>(v), tl::kBFloat16);
  };
  auto f32 = [](const Tensor& t) { return values<float>(t.to(tl::kFloat32)); };
  // float16 spacing is 2 at 2048 (2049 ties to even) and 2^-10 at 1.
  EXPECT_EQ(f32(h({2048, 1}) + 1), (std::vector<float>{2048, 2}));
  EXPECT_EQ(f32(h({1}) + 0.0004), (std::vector<float>{1}));
  EXPECT_EQ(f32(h({1}) + 0.0006), (std::vector<float>{1.0009765625f}));
  EXPECT_EQ(f32(h({65504}) * 2), (std::vector<float>{std::numeric_limits<float>::infinity()}));
  // bfloat16 keeps 8 significant bits: 257 -> 256 (ties to even), 1 + 2^-8 -> 1.
  EXPECT_EQ(f32(bf({256}) + 1), (std::vector<float>{256}));
  EXPECT_EQ(f32(bf({256}) + 3), (std::vector<float>{260}));
  EXPECT_EQ(f32(bf({1}) + 0.00390625), (std::vector<float>{1}));
  // (1/3 rounded to float16) * 3 = 0.999755859375 exactly, halfway between the float16
  // neighbours 0.99951171875 and 1: ties go to even, 1.
  EXPECT_EQ(f32(h({1.0 / 3}) * 3), (std::vector<float>{1}));
  // 0.1 in float16 (0.0999755859375) squared is exact in float32 and rounds once, to
  // 1310 * 2^-17.
  EXPECT_EQ(f32(h({0.1}) * h({0.1})), (std::vector<float>{0.0099945068359375f}));
  // A sum accumulates in double and rounds once: 4096 halves of 1 make 4096 exactly.
  EXPECT_EQ(f32(tl::ones({4096}, tl::kFloat16).sum()), (std::vector<float>{4096}));
  EXPECT_EQ(tl::ones({4096}, tl::kBFloat16).sum().dtype(), tl::kBFloat16);
  // Mixed 16-bit floats meet at float32.
  EXPECT_EQ((h({1}) + bf({1})).dtype(), tl::kFloat32);
  // The 16-bit floats take the plain matmul loop (no BLAS), accumulating in double.
  const Tensor m = h({1, 2, 3, 4}).view({2, 2});
  EXPECT_EQ(f32(m.matmul(m)), (std::vector<float>{7, 10, 15, 22}));
}

}  // namespace
