// Printing matches PyTorch's repr for the common cases.
#include <gtest/gtest.h>

#include <tensorlib/tensorlib.h>

namespace {

TEST(Print, MatchesPyTorchRepr) {
  EXPECT_EQ(tl::tensor({{1.0, 2.0}, {3.0, 4.0}}).toString(),
            "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(tl::tensor({1, 2, 3}).toString(), "tensor([1, 2, 3])");
  EXPECT_EQ(tl::tensor({0.5, 1.25}).toString(), "tensor([0.5000, 1.2500])");
  EXPECT_EQ(tl::tensor({1.0, 2.0}, tl::kFloat64).toString(), "tensor([1., 2.], dtype=tl.float64)");
  EXPECT_EQ(tl::tensor({1, 2}, tl::kInt32).toString(), "tensor([1, 2], dtype=tl.int32)");
  EXPECT_EQ(tl::tensor(3.0).toString(), "tensor(3.)");
  EXPECT_EQ(tl::tensor({true, false}).toString(), "tensor([ True, False])");
  EXPECT_EQ(tl::zeros({0}).toString(), "tensor([])");
  EXPECT_EQ(tl::tensor({-1.5, 10.25}).toString(), "tensor([-1.5000, 10.2500])");
}

TEST(Print, ThreeDimensionsSeparateBlocksWithABlankLine) {
  EXPECT_EQ(tl::arange(8).view({2, 2, 2}).toString(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
}

TEST(Print, LargeTensorsAreSummarised) {
  std::string s = tl::arange(2000).toString();
  EXPECT_EQ(s, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
}

}  // namespace
