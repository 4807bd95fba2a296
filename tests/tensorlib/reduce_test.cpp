// Reductions (tensorlib/ops/reduce.cpp, the CPU loops in cpu/reduce.cpp) against naive float64
// references computed here with explicit loops over the input's elements, read through data_ptr
// and strides.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensorlib/core/memory.h"
#include "tensorlib/core/tensor.h"

namespace {

using tl::Tensor;
using Sizes = std::vector<int64_t>;
using Values = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every element of t (any strides, any dtype) in row-major order, as double.
Values values_of(const Tensor& t) {
  Values out;
  const int64_t nd = t.dim(), n = t.numel();
  if (n == 0) return out;
  TL_DISPATCH_ALL(t.dtype(), "values_of", [&]<typename T>() {
    const T* base = static_cast<const T*>(t.data_ptr());
    Sizes idx(nd, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.stride(d);
      out.push_back(static_cast<double>(base[off]));
      for (int64_t d = nd - 1; d >= 0 && ++idx[d] == t.size(d); --d) idx[d] = 0;
    }
  });
  return out;
}

// A contiguous tensor of `dtype` filled with uniform values in [lo, hi] (integers for integer
// dtypes) from a fixed seed.
Tensor random_tensor(const Sizes& sizes, tl::ScalarType dtype, uint32_t seed, double lo = -2.0,
                     double hi = 2.0) {
  Tensor t = tl::empty(sizes, dtype);
  std::mt19937 gen(seed);
  TL_DISPATCH_ALL(dtype, "random_tensor", [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        std::uniform_int_distribution<int64_t> dist{static_cast<int64_t>(lo),
                                                    static_cast<int64_t>(hi)};
        p[i] = static_cast<T>(dist(gen));
      } else {
        std::uniform_real_distribution<double> dist(lo, hi);
        if constexpr (std::is_same_v<T, double>) {
          p[i] = dist(gen);
        } else {
          p[i] = T(static_cast<float>(dist(gen)));
        }
      }
    }
  });
  return t;
}

// The elements of t grouped by output position of a reduction over `dims` (empty = all),
// output positions in row-major order of the kept dims.
std::vector<Values> groups(const Tensor& t, Sizes dims) {
  const int64_t nd = t.dim();
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims) reduced[d < 0 ? d + nd : d] = true;
  int64_t n_out = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) n_out *= t.size(d);
  std::vector<Values> out(n_out);
  const Values v = values_of(t);
  Sizes idx(nd, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!reduced[d]) o = o * t.size(d) + idx[d];
    out[o].push_back(v[i]);
    for (int64_t d = nd - 1; d >= 0 && ++idx[d] == t.size(d); --d) idx[d] = 0;
  }
  return out;
}

Sizes reduced_sizes(const Tensor& t, Sizes dims, bool keepdim) {
  const int64_t nd = t.dim();
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims) reduced[d < 0 ? d + nd : d] = true;
  Sizes out;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d])
      out.push_back(t.size(d));
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

double ref_sum(const Values& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double ref_mean(const Values& v) {
  return ref_sum(v) / double(v.size());
}
double ref_var(const Values& v, int correction) {
  const double m = ref_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(int64_t(v.size()) - correction);
}
double ref_logsumexp(const Values& v) {
  double s = 0;
  for (double x : v) s += std::exp(x);
  return std::log(s);
}

// Checks out's shape and that each element matches `ref` over the groups of t.
void expect_reduction(const Tensor& out, const Tensor& t, const Sizes& dims, bool keepdim,
                      const std::function<double(const Values&)>& ref, double tol) {
  ASSERT_EQ(out.sizes().vec(), reduced_sizes(t, dims, keepdim));
  const Values got = values_of(out);
  const std::vector<Values> g = groups(t, dims);
  ASSERT_EQ(got.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = ref(g[i]);
    EXPECT_NEAR(got[i], want, tol * std::max(1.0, std::abs(want))) << "output element " << i;
  }
}

const std::vector<Sizes> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-3, -1}, {1, 0}, {0, 1, 2}};

// Inputs of shape [3, 4, 5] in several layouts, all holding values from one seed.
std::vector<std::pair<std::string, Tensor>> layouts(tl::ScalarType dtype) {
  const Tensor base = random_tensor({3, 4, 5}, dtype, 7);
  const Tensor wide = random_tensor({5, 4, 6}, dtype, 8);
  const Tensor row = random_tensor({1, 4, 5}, dtype, 9);
  return {{"contiguous", base},
          {"transposed", random_tensor({5, 4, 3}, dtype, 10).transpose(0, 2)},
          {"sliced", wide.slice(2, 1, 6).slice(0, 0, 5, 2).slice(2, 0, 5)},
          {"expanded", row.expand({3, 4, 5})},
          {"permuted", random_tensor({4, 5, 3}, dtype, 11).permute({2, 0, 1})}};
}

TEST(ReduceTest, SumMeanOverDimSetsAndLayouts) {
  for (const auto& [name, t] : layouts(tl::kFloat64)) {
    ASSERT_EQ(t.sizes().vec(), (Sizes{3, 4, 5})) << name;
    for (const Sizes& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(name + " dims " + ::testing::PrintToString(dims) +
                     (keepdim ? " keepdim" : ""));
        expect_reduction(t.sum(dims, keepdim), t, dims, keepdim, ref_sum, 1e-12);
        expect_reduction(t.mean(dims, keepdim), t, dims, keepdim, ref_mean, 1e-12);
      }
    }
  }
}

TEST(ReduceTest, FullSumIsZeroDim) {
  const Tensor t = random_tensor({4, 6}, tl::kFloat32, 3);
  const Tensor s = t.sum();
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), tl::kFloat32);
  EXPECT_NEAR(s.item<double>(), ref_sum(values_of(t)), 1e-5);
  EXPECT_NEAR(tl::mean(t).item<double>(), ref_mean(values_of(t)), 1e-6);
}

TEST(ReduceTest, Float32SumAccumulatesInDouble) {
  // 2^24 + 1 is not a float32: a float accumulator would stay at 2^24 after each +1.
  Tensor t = tl::ones({65}, tl::kFloat32);
  t.data_ptr<float>()[0] = float(1 << 24);
  EXPECT_EQ(t.sum().item<double>(), double((1 << 24) + 64));
}

TEST(ReduceTest, IntegerAndBoolSumsAreInt64) {
  const Tensor t = random_tensor({3, 4}, tl::kInt32, 5, -100, 100);
  const Tensor s = t.sum({1});
  EXPECT_EQ(s.dtype(), tl::kInt64);
  const std::vector<Values> g = groups(t, {1});
  const Values got = values_of(s);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(got[i], ref_sum(g[i]));

  const Tensor b = tl::tensor({true, false, true, true});
  EXPECT_EQ(b.sum().dtype(), tl::kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), 3);
  EXPECT_EQ(tl::tensor({200, 100}).to(tl::kUInt8).sum().item<int64_t>(), 300);

  const Tensor as_double = t.sum({0}, false, tl::kFloat64);
  EXPECT_EQ(as_double.dtype(), tl::kFloat64);
  expect_reduction(as_double, t, {0}, false, ref_sum, 0);
}

TEST(ReduceTest, MeanOfIntegersIsAnError) {
  const Tensor t = tl::arange(6, tl::kInt64);
  try {
    t.mean();
    FAIL() << "mean of int64 did not throw";
  } catch (const tl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mean(): could not infer output dtype. Input dtype must be either a "
                       "floating point or complex dtype. Got: "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(std::string(tl::dtype_name(tl::kInt64))), std::string::npos) << msg;
  }
  // An explicit floating dtype makes it valid.
  EXPECT_DOUBLE_EQ(t.mean(tl::kFloat64).item<double>(), 2.5);
  EXPECT_THROW(t.mean({0}, false, tl::kInt32), tl::Error);
}

TEST(ReduceTest, EmptyTensors) {
  const Tensor e = tl::empty({0}, tl::kFloat32);
  EXPECT_EQ(e.sum().item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_EQ(e.prod().item<double>(), 1.0);

  const Tensor m = tl::empty({2, 0}, tl::kFloat64);
  EXPECT_EQ(values_of(m.sum({1})), (Values{0.0, 0.0}));
  EXPECT_EQ(m.sum({0}).sizes().vec(), (Sizes{0}));
  EXPECT_EQ(m.sum({1}, true).sizes().vec(), (Sizes{2, 1}));

  try {
    e.max();
    FAIL() << "max of an empty tensor did not throw";
  } catch (const tl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("numel() == 0"), std::string::npos) << err.what();
  }
  EXPECT_THROW(e.min(), tl::Error);
  EXPECT_THROW(e.argmax(), tl::Error);
  EXPECT_THROW(m.max(1), tl::Error);
  // Reducing a non-empty dim of an empty tensor is fine: the result is empty.
  auto [values, indices] = m.max(0);
  EXPECT_EQ(values.sizes().vec(), (Sizes{0}));
  EXPECT_EQ(indices.dtype(), tl::kInt64);
}

TEST(ReduceTest, ZeroDimInputs) {
  const Tensor s = tl::full({}, 2.5, tl::kFloat64);
  EXPECT_EQ(s.sum().dim(), 0);
  EXPECT_EQ(s.sum().item<double>(), 2.5);
  EXPECT_EQ(s.sum({0}).item<double>(), 2.5);
  EXPECT_EQ(s.sum({-1}, true).dim(), 0);
  EXPECT_EQ(s.max().item<double>(), 2.5);
  auto [v, i] = s.max(0);
  EXPECT_EQ(v.item<double>(), 2.5);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(s.softmax(0).item<double>(), 1.0);
  EXPECT_THROW(s.sum({1}), tl::IndexError);
}

TEST(ReduceTest, BadDims) {
  const Tensor t = tl::zeros({2, 3});
  EXPECT_THROW(t.sum({2}), tl::IndexError);
  EXPECT_THROW(t.sum({-3}), tl::IndexError);
  EXPECT_THROW(t.sum({0, -2}), tl::Error);  // the same dim twice
  EXPECT_THROW(t.max(5), tl::IndexError);
}

TEST(ReduceTest, Prod) {
  const Tensor t = random_tensor({3, 4}, tl::kFloat64, 21, 0.5, 1.5);
  auto ref_prod = [](const Values& v) {
    double p = 1;
    for (double x : v) p *= x;
    return p;
  };
  expect_reduction(t.prod(), t, {}, false, ref_prod, 1e-12);
  expect_reduction(t.prod(1), t, {1}, false, ref_prod, 1e-12);
  expect_reduction(t.t().prod(-1, true), t.t(), {-1}, true, ref_prod, 1e-12);

  const Tensor i = tl::tensor({{1, 2, 3}, {4, 5, 6}}).to(tl::kInt32);
  EXPECT_EQ(i.prod().dtype(), tl::kInt64);
  EXPECT_EQ(i.prod().item<int64_t>(), 720);
  EXPECT_EQ(values_of(i.prod(0)), (Values{4, 10, 18}));
}

TEST(ReduceTest, MaxMinWithDimReturnValuesAndIndices) {
  for (const auto& [name, t] : layouts(tl::kFloat32)) {
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(name + " dim " + std::to_string(dim));
        auto [mx, imx] = t.max(dim, keepdim);
        auto [mn, imn] = t.min(dim, keepdim);
        const Sizes want_sizes = reduced_sizes(t, {dim}, keepdim);
        ASSERT_EQ(mx.sizes().vec(), want_sizes);
        ASSERT_EQ(imn.sizes().vec(), want_sizes);
        EXPECT_EQ(mx.dtype(), tl::kFloat32);
        EXPECT_EQ(imx.dtype(), tl::kInt64);
        const std::vector<Values> g = groups(t, {dim});
        const Values vmx = values_of(mx), vmn = values_of(mn);
        const Values ixmx = values_of(imx), ixmn = values_of(imn);
        const Values argmx = values_of(t.argmax(dim, keepdim));
        for (size_t i = 0; i < g.size(); ++i) {
          size_t hi = 0, lo = 0;
          for (size_t j = 1; j < g[i].size(); ++j) {
            if (g[i][j] > g[i][hi]) hi = j;
            if (g[i][j] < g[i][lo]) lo = j;
          }
          EXPECT_EQ(vmx[i], g[i][hi]);
          EXPECT_EQ(vmn[i], g[i][lo]);
          EXPECT_EQ(ixmx[i], double(hi));
          EXPECT_EQ(ixmn[i], double(lo));
          EXPECT_EQ(argmx[i], double(hi));
        }
      }
    }
  }
}

TEST(ReduceTest, FullMaxMinAndFlattenedArgmax) {
  const Tensor t = tl::tensor({{3.0, 9.0, -1.0}, {9.0, 0.5, -4.0}});
  EXPECT_EQ(t.max().dim(), 0);
  EXPECT_EQ(t.max().item<double>(), 9.0);
  EXPECT_EQ(t.min().item<double>(), -4.0);
  EXPECT_EQ(t.argmax().item<int64_t>(), 1);  // the first of the tied maxima, flattened
  EXPECT_EQ(t.argmin().item<int64_t>(), 5);
  EXPECT_EQ(t.argmax(std::nullopt, true).sizes().vec(), (Sizes{1, 1}));
  EXPECT_EQ(values_of(t.argmax(0)), (Values{1, 0, 0}));
  EXPECT_EQ(values_of(t.argmin(1)), (Values{2, 2}));
  // Transposed: argmax indexes the flattened *logical* order (1, 7, 5, 2), not memory order.
  EXPECT_EQ(tl::tensor({{1, 5}, {7, 2}}).t().argmax().item<int64_t>(), 1);

  const Tensor ints = tl::tensor({4, -2, 7, 7});
  EXPECT_EQ(ints.max().item<int64_t>(), 7);
  EXPECT_EQ(ints.argmax().item<int64_t>(), 2);
  EXPECT_EQ(tl::tensor({false, true}).max().item<bool>(), true);
}

TEST(ReduceTest, MaxPropagatesNaN) {
  const Tensor t = tl::tensor({1.0, kNaN, 5.0}, tl::kFloat64);
  EXPECT_TRUE(std::isnan(t.max().item<double>()));
  EXPECT_TRUE(std::isnan(t.min().item<double>()));
  EXPECT_EQ(t.argmax().item<int64_t>(), 1);
  auto [v, i] = t.max(0);
  EXPECT_TRUE(std::isnan(v.item<double>()));
  EXPECT_EQ(i.item<int64_t>(), 1);
}

TEST(ReduceTest, VarStdBothCorrections) {
  for (const auto& [name, t] : layouts(tl::kFloat64)) {
    for (const Sizes& dims : kDimSets) {
      for (bool unbiased : {true, false}) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(name + " dims " + ::testing::PrintToString(dims) +
                       (unbiased ? " unbiased" : " biased"));
          const int c = unbiased ? 1 : 0;
          expect_reduction(
              t.var(dims, unbiased, keepdim), t, dims, keepdim,
              [c](const Values& v) { return ref_var(v, c); }, 1e-12);
          expect_reduction(
              t.std(dims, unbiased, keepdim), t, dims, keepdim,
              [c](const Values& v) { return std::sqrt(ref_var(v, c)); }, 1e-12);
        }
      }
    }
  }
  const Tensor t = tl::tensor({1.0, 2.0, 3.0, 4.0}, tl::kFloat64);
  EXPECT_DOUBLE_EQ(t.var().item<double>(), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(t.var(false).item<double>(), 1.25);
  EXPECT_DOUBLE_EQ(tl::std(t, {0}, false).item<double>(), std::sqrt(1.25));
  // One element with correction 1 divides by zero: nan, as PyTorch.
  EXPECT_TRUE(std::isnan(tl::tensor({3.0}).var().item<double>()));
  EXPECT_THROW(tl::tensor({1, 2}).var(), tl::Error);
}

TEST(ReduceTest, LogSumExp) {
  for (const auto& [name, t] : layouts(tl::kFloat64)) {
    for (const Sizes& dims : kDimSets) {
      SCOPED_TRACE(name + " dims " + ::testing::PrintToString(dims));
      expect_reduction(t.logsumexp(dims, true), t, dims, true, ref_logsumexp, 1e-12);
    }
  }
  // exp(1000) overflows a double; the stable form does not.
  const Tensor big = tl::tensor({{1000.0, 1000.0}, {-1000.0, 1000.0}}, tl::kFloat32);
  const Values got = values_of(big.logsumexp({1}));
  EXPECT_NEAR(got[0], 1000.0 + std::log(2.0), 1e-3);
  EXPECT_NEAR(got[1], 1000.0, 1e-3);
  EXPECT_EQ(tl::tensor({-kInf, -kInf}).logsumexp({0}).item<double>(), -kInf);
  EXPECT_EQ(tl::tensor({kInf, 1.0}).logsumexp({0}).item<double>(), kInf);
  // Integers are computed in the default floating dtype.
  const Tensor ints = tl::tensor({0, 0});
  EXPECT_EQ(ints.logsumexp({0}).dtype(), tl::get_default_dtype());
  EXPECT_NEAR(ints.logsumexp({0}).item<double>(), std::log(2.0), 1e-6);
}

// softmax along `dim` of a 3-D tensor by the textbook formula exp(x) / sum exp(x).
void expect_softmax(const Tensor& got, const Tensor& t, int64_t dim, bool log, double tol) {
  ASSERT_EQ(got.sizes().vec(), t.sizes().vec());
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  const Values x = values_of(t), y = values_of(got);
  const Sizes sz = t.sizes().vec();
  int64_t inner = 1;
  for (int64_t i = d + 1; i < t.dim(); ++i) inner *= sz[i];
  const int64_t len = sz[d];
  for (size_t i = 0; i < x.size(); ++i) {
    // The first element of i's slice along dim.
    const int64_t start = int64_t(i) - ((int64_t(i) / inner) % len) * inner;
    double s = 0;
    for (int64_t k = 0; k < len; ++k) s += std::exp(x[start + k * inner]);
    const double want = log ? x[i] - std::log(s) : std::exp(x[i]) / s;
    EXPECT_NEAR(y[i], want, tol) << "element " << i;
  }
}

TEST(ReduceTest, SoftmaxMatchesFormulaAndSumsToOne) {
  for (const auto& [name, t] : layouts(tl::kFloat64)) {
    for (int64_t dim : {0, 1, 2, -1}) {
      SCOPED_TRACE(name + " dim " + std::to_string(dim));
      const Tensor s = t.softmax(dim);
      expect_softmax(s, t, dim, false, 1e-12);
      expect_softmax(t.log_softmax(dim), t, dim, true, 1e-12);
      for (double total : values_of(s.sum({dim}))) EXPECT_NEAR(total, 1.0, 1e-12);
    }
  }
}

TEST(ReduceTest, SoftmaxIsStableAndHonoursDtype) {
  const Tensor big = tl::tensor({{1000.0, 1000.0, 999.0}}, tl::kFloat32);
  const Values s = values_of(big.softmax(1));
  const double e = std::exp(-1.0);
  EXPECT_NEAR(s[0], 1.0 / (2.0 + e), 1e-6);
  EXPECT_NEAR(s[2], e / (2.0 + e), 1e-6);
  const Values ls = values_of(tl::log_softmax(big, -1));
  EXPECT_NEAR(ls[0], -std::log(2.0 + e), 1e-5);

  const Tensor f = random_tensor({2, 3}, tl::kFloat32, 4);
  const Tensor d = f.softmax(1, tl::kFloat64);
  EXPECT_EQ(d.dtype(), tl::kFloat64);
  expect_softmax(d, f.to(tl::kFloat64), 1, false, 1e-12);
  EXPECT_EQ(tl::softmax(tl::tensor({1, 2}), 0, tl::kFloat32).dtype(), tl::kFloat32);
  EXPECT_THROW(tl::tensor({1, 2}).softmax(0), tl::Error);
}

TEST(ReduceTest, HalfPrecisionAccumulatesWide) {
  // 4096 float16 ones: a float16 accumulator would stop at 2048.
  const Tensor h = tl::ones({4096}, tl::kFloat16);
  EXPECT_EQ(h.sum().dtype(), tl::kFloat16);
  EXPECT_EQ(h.sum().item<double>(), 4096.0);
  const Tensor b = random_tensor({8, 16}, tl::kBFloat16, 12);
  expect_reduction(b.mean({1}), b, {1}, false, ref_mean, 1e-2);
}

}  // namespace

namespace {
// Regression: t.var({1}) once converted {1} to `unbiased` and reduced every dim.
TEST(ReduceBraces, BracedDimListReducesThatDim) {
  tl::Tensor t = tl::tensor({{1.0, 2.0, 3.0}, {10.0, 20.0, 60.0}});
  tl::Tensor v = t.var({1});
  ASSERT_EQ(v.sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(v.select(0, 0).item<double>(), 1.0);     // sample variance of 1, 2, 3
  EXPECT_NEAR(v.select(0, 1).item<double>(), 700.0, 1e-4);  // of 10, 20, 60 (mean 30)
  EXPECT_EQ(t.std({0}).sizes().vec(), (std::vector<int64_t>{3}));
}
// Note [Sums over leading dimensions]: a bias gradient's sum(0) reads the contiguous input in
// place -- one allocation, the result -- and gives exactly what the general (copying) path
// gives on a non-contiguous tensor with the same values.
TEST(Reduce, SumOverLeadingDimsNeedsNoCopy) {
  tl::manual_seed(3);
  tl::Tensor x = tl::randn({257, 33});
  tl::Tensor y = x.t().contiguous().t();  // same values, column-major: the general path
  ASSERT_FALSE(y.is_contiguous());
  const auto before = tl::memory_stats()["allocation.all.allocated"];
  tl::Tensor s = x.sum({0});
  EXPECT_EQ(tl::memory_stats()["allocation.all.allocated"] - before, 1);
  EXPECT_TRUE(tl::equal(s, y.sum({0})));
  double naive = 0;
  for (int64_t i = 0; i < 257; ++i) naive += x[i][5].item<double>();
  EXPECT_NEAR(s[5].item<double>(), naive, 1e-4);

  tl::Tensor z = tl::randn({4, 5, 6}, tl::kFloat64);
  tl::Tensor zt = z.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
  EXPECT_TRUE(tl::equal(z.sum({0, 1}), zt.sum({0, 1})));
  EXPECT_TRUE(tl::equal(z.sum({0, 1}, true), zt.sum({0, 1}, true)));
  EXPECT_EQ(z.sum({0, 1}, true).sizes().vec(), (std::vector<int64_t>{1, 1, 6}));
  // Integers keep the general path's promotion to int64.
  EXPECT_EQ(tl::ones({3, 2}, tl::kInt32).sum({0}).dtype(), tl::kInt64);
}

}  // namespace
