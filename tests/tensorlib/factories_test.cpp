// Factories: shapes, dtypes and values, reproducible random numbers.
#include <gtest/gtest.h>

#include <cmath>

#include <tensorlib/core/generator.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;

std::vector<double> to_vector(const Tensor& t) {
  Tensor c = t.to(tl::kFloat64).contiguous().view({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(Factories, FullInfersTheDtypeFromTheValue) {
  EXPECT_EQ(tl::full({2}, 1).dtype(), tl::kInt64);
  EXPECT_EQ(tl::full({2}, 1.5).dtype(), tl::kFloat32);
  EXPECT_EQ(tl::full({2}, true).dtype(), tl::kBool);
  EXPECT_EQ(tl::zeros({2, 3}).dtype(), tl::kFloat32);
  EXPECT_EQ(tl::ones({2}, tl::kInt32).dtype(), tl::kInt32);
  EXPECT_EQ(to_vector(tl::full({3}, 2.5)), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(tl::zeros({0, 3}).numel(), 0);
  EXPECT_THROW(tl::zeros({-1}), tl::Error);
}

TEST(Factories, ArangeCountsAndDtypes) {
  EXPECT_EQ(to_vector(tl::arange(5)), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(tl::arange(5).dtype(), tl::kInt64);
  Tensor f = tl::arange(0, 1, 0.25);
  EXPECT_EQ(f.dtype(), tl::kFloat32);
  EXPECT_EQ(to_vector(f), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(tl::arange(1, 2.5, 0.5).numel(), 3);  // ceil((2.5 - 1) / 0.5)
  EXPECT_EQ(to_vector(tl::arange(5, 0, -2)), (std::vector<double>{5, 3, 1}));
  EXPECT_THROW(tl::arange(0, 5, -1), tl::Error);
}

TEST(Factories, LinspaceHitsBothEndsExactly) {
  Tensor l = tl::linspace(-1, 1, 5);
  EXPECT_EQ(to_vector(l), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  Tensor d = tl::linspace(0.1, 0.7, 7, tl::kFloat64);
  EXPECT_EQ(to_vector(d).back(), 0.7);
  EXPECT_EQ(to_vector(d).front(), 0.1);
  EXPECT_NEAR(to_vector(d)[3], 0.4, 1e-15);
  EXPECT_EQ(tl::linspace(3, 3, 1).item<double>(), 3.0);
}

TEST(Factories, EyeIsTheIdentity) {
  EXPECT_EQ(to_vector(tl::eye(2, 3)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(tl::eye(4).sum().item<double>(), 4.0);
}

TEST(Factories, ManualSeedMakesRandomTensorsReproducible) {
  tl::manual_seed(42);
  Tensor a = tl::randn({100});
  Tensor b = tl::rand({3, 3});
  tl::manual_seed(42);
  EXPECT_TRUE(tl::equal(tl::randn({100}), a));
  EXPECT_TRUE(tl::equal(tl::rand({3, 3}), b));
  tl::manual_seed(43);
  EXPECT_FALSE(tl::equal(tl::randn({100}), a));
}

TEST(Factories, RandomDistributionsHaveTheRightMoments) {
  tl::manual_seed(7);
  const int64_t n = 200000;
  auto u = to_vector(tl::rand({n}));
  double mean = 0, var = 0;
  for (double x : u) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    mean += x;
  }
  mean /= n;
  for (double x : u) var += (x - mean) * (x - mean);
  var /= n;
  // Standard errors: 0.0006 for the mean, 0.0002 for the variance; allow ~6 sigma.
  EXPECT_NEAR(mean, 0.5, 0.004);
  EXPECT_NEAR(var, 1.0 / 12, 0.0015);

  auto g = to_vector(tl::randn({n}, tl::kFloat64));
  mean = var = 0;
  for (double x : g) mean += x;
  mean /= n;
  for (double x : g) var += (x - mean) * (x - mean);
  var /= n;
  EXPECT_NEAR(mean, 0.0, 0.015);
  EXPECT_NEAR(var, 1.0, 0.02);
  int64_t within1 = 0;
  for (double x : g) within1 += std::fabs(x) < 1;
  EXPECT_NEAR(double(within1) / n, 0.6827, 0.006);

  auto r = to_vector(tl::randint(-3, 4, {n}));
  std::vector<int64_t> counts(7, 0);
  for (double x : r) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    counts[int64_t(x) + 3]++;
  }
  for (auto c : counts) EXPECT_NEAR(double(c) / n, 1.0 / 7, 0.006);
  EXPECT_EQ(tl::randint(10, {5}).dtype(), tl::kInt64);
  EXPECT_THROW(tl::rand({2}, tl::kInt64), tl::Error);
}

TEST(Factories, NestedListsGiveShapeAndDtype) {
  Tensor t = tl::tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.dtype(), tl::kInt64);
  EXPECT_EQ(t.select(1, 2).select(0, 1).item<int64_t>(), 6);
  EXPECT_EQ(tl::tensor({1, 2.5}).dtype(), tl::kFloat32);
  EXPECT_EQ(tl::tensor({true, false}).dtype(), tl::kBool);
  EXPECT_EQ(tl::tensor(3.5).dim(), 0);
  EXPECT_EQ(tl::tensor({{1}, {2}}, tl::kFloat64).dtype(), tl::kFloat64);
  EXPECT_THROW(tl::tensor({{1, 2}, {3}}), tl::Error);
  Tensor v = tl::tensor(std::vector<float>{1.5f, 2.5f});
  EXPECT_EQ(v.dtype(), tl::kFloat32);
  EXPECT_EQ(to_vector(v), (std::vector<double>{1.5, 2.5}));
}

TEST(Factories, FromBlobSharesTheCallersMemory) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = tl::from_blob(data, {2, 3});
  EXPECT_EQ(t.data_ptr(), static_cast<void*>(data));
  t.mul_(2);
  EXPECT_EQ(data[5], 12.0f);
  Tensor strided = tl::from_blob(data, {3}, {2});
  EXPECT_EQ(to_vector(strided), (std::vector<double>{2, 6, 10}));
  bool deleted = false;
  {
    Tensor owned = tl::from_blob(data, {6}, [&](void* p) { deleted = (p == data); });
    Tensor view = owned.narrow(0, 1, 2);
    owned = Tensor();
    EXPECT_FALSE(deleted);  // the view keeps the storage alive
  }
  EXPECT_TRUE(deleted);
}

TEST(Factories, LikeFactoriesKeepShapeAndDtype) {
  Tensor a = tl::ones({2, 2}, tl::kFloat64);
  EXPECT_EQ(tl::zeros_like(a).dtype(), tl::kFloat64);
  EXPECT_EQ(tl::full_like(a, 3).sum().item<double>(), 12.0);
  EXPECT_EQ(tl::ones_like(a, tl::kInt32).dtype(), tl::kInt32);
}

}  // namespace
