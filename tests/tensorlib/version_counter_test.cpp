// Note [Version counter]: `_version()` counts the user-visible in-place writes to a tensor, as
// PyTorch's `_version` (the expected numbers are PyTorch 2.x's): a new tensor starts at 0 and
// each in-place op bumps it once.
#include <gtest/gtest.h>

#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;

TEST(VersionCounter, NewTensorsStartAtZero) {
  const Tensor base = tl::arange(6, tl::kFloat32).view({2, 3});
  // torch.zeros(2)._version == 0, and so for every factory and every op that makes a tensor.
  const std::vector<std::pair<const char*, Tensor>> made = {
      {"zeros", tl::zeros({2})},
      {"ones", tl::ones({2})},
      {"full", tl::full({2}, 3.5)},
      {"empty", tl::empty({2})},
      {"zeros_like", tl::zeros_like(base)},
      {"full_like", tl::full_like(base, 2)},
      {"arange", tl::arange(4)},
      {"rand", tl::rand({3})},
      {"randint", tl::randint(5, {3})},
      {"tensor", tl::tensor({1.0, 2.0})},
      {"clone", base.clone()},
      {"contiguous", base.t().contiguous()},
      {"reshape (a copy)", base.t().reshape({6})},
      {"to (dtype)", base.to(tl::kFloat64)},
      {"cat", tl::cat({base, base}, 0)},
      {"add", base + 1},
      {"masked_fill", base.masked_fill(base > 2, 0)},
      {"scatter_add", tl::zeros({2, 3}).scatter_add(1, tl::zeros({2, 3}, tl::kInt64), base)},
      {"sum", base.sum()},
      {"matmul", base.matmul(base.t())},
  };
  for (const auto& [name, t] : made) EXPECT_EQ(t._version(), 0u) << name;
  EXPECT_EQ(base._version(), 0u) << "ops that read a tensor leave its version alone";
}

TEST(VersionCounter, EachInPlaceOpBumpsOnce) {
  Tensor x = tl::zeros({3});
  x.add_(1);
  EXPECT_EQ(x._version(), 1u);
  x.fill_(2);
  EXPECT_EQ(x._version(), 2u);
  x.zero_();
  EXPECT_EQ(x._version(), 3u);
  x.copy_(tl::ones({3}));
  EXPECT_EQ(x._version(), 4u);
  x.masked_fill_(tl::tensor({true, false, true}), 5);
  EXPECT_EQ(x._version(), 5u);
  x.scatter_add_(0, tl::tensor({int64_t{0}}), tl::ones({1}));
  EXPECT_EQ(x._version(), 6u);
  x.clamp_(0, 1);
  x.exp_();
  EXPECT_EQ(x._version(), 8u);
}

TEST(VersionCounter, AnInPlaceOpThatConvertsItsResultStillBumpsOnce) {
  // float32 += float64: computed in float64, written back as float32; one bump in PyTorch.
  Tensor x = tl::zeros({2}, tl::kFloat32);
  x.add_(tl::ones({2}, tl::kFloat64));
  EXPECT_EQ(x._version(), 1u);
  EXPECT_EQ(x.dtype(), tl::kFloat32);
}

TEST(VersionCounter, ViewsShareTheCounterOfTheirBase) {
  Tensor base = tl::zeros({2, 3});
  Tensor row = base.select(0, 1);
  EXPECT_EQ(row._version(), 0u);
  row.mul_(2);
  EXPECT_EQ(base._version(), 1u);
  EXPECT_EQ(row._version(), 1u);
}

}  // namespace
