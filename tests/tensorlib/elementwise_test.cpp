// Elementwise ops: broadcasting over any strides, values against std:: math in double, and
// the in-place forms' version counter.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;

// Reads element i of a 1-D tensor of any float dtype as double, through its strides.
double get(const Tensor& t, int64_t i) {
  return t.select(0, i).item<double>();
}

std::vector<double> to_vector(const Tensor& t) {
  Tensor c = t.to(tl::kFloat64).contiguous().view({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(Elementwise, BroadcastsColumnAgainstRow) {
  Tensor col = tl::tensor({{1.0}, {2.0}, {3.0}});       // [3, 1]
  Tensor row = tl::tensor({{10.0, 20.0, 30.0, 40.0}});  // [1, 4]
  Tensor s = col + row;
  ASSERT_EQ(s.sizes().vec(), (std::vector<int64_t>{3, 4}));
  auto v = to_vector(s);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(v[i * 4 + j], (i + 1) + 10.0 * (j + 1));
}

TEST(Elementwise, BroadcastErrorNamesBothShapes) {
  try {
    tl::zeros({3, 4}) + tl::zeros({5});
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot broadcast [3, 4] with [5]", 0), 0u) << e.what();
  }
}

TEST(Elementwise, NonContiguousInputsGiveTheSameValues) {
  tl::manual_seed(3);
  Tensor a = tl::randn({5, 7});
  Tensor b = tl::randn({7, 5});
  Tensor r = a * b.t() - a.t().t();  // b.t() is not contiguous
  auto va = to_vector(a), vb = to_vector(b), vr = to_vector(r);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_FLOAT_EQ(vr[i * 7 + j], float(float(va[i * 7 + j] * vb[j * 5 + i]) - va[i * 7 + j]));
  // Every second column of a wider tensor, plus a broadcast row.
  Tensor wide = tl::arange(24, tl::kFloat64).view({4, 6});
  Tensor cols = wide.slice(1, 0, 6, 2);
  Tensor sum = cols + tl::tensor({100.0, 200.0, 300.0}, tl::kFloat64);
  EXPECT_EQ(to_vector(sum)[3], 6 + 100.0);   // row 1, column 0 of cols = wide[1][0]
  EXPECT_EQ(to_vector(sum)[5], 10 + 300.0);  // row 1, column 2 of cols = wide[1][4]
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

TEST(Elementwise, UnaryMathMatchesDoubleReference) {
  std::vector<UnaryCase> cases = {
      {"exp", [](const Tensor& t) { return t.exp(); }, [](double x) { return std::exp(x); }, -3, 3},
      {"log", [](const Tensor& t) { return t.log(); }, [](double x) { return std::log(x); }, 0.1,
       9},
      {"sqrt", [](const Tensor& t) { return t.sqrt(); }, [](double x) { return std::sqrt(x); }, 0,
       9},
      {"rsqrt", [](const Tensor& t) { return t.rsqrt(); },
       [](double x) { return 1 / std::sqrt(x); }, 0.1, 9},
      {"sin", [](const Tensor& t) { return t.sin(); }, [](double x) { return std::sin(x); }, -4, 4},
      {"cos", [](const Tensor& t) { return t.cos(); }, [](double x) { return std::cos(x); }, -4, 4},
      {"tanh", [](const Tensor& t) { return t.tanh(); }, [](double x) { return std::tanh(x); }, -4,
       4},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {"relu", [](const Tensor& t) { return t.relu(); }, [](double x) { return x > 0 ? x : 0; }, -2,
       2},
      {"gelu", [](const Tensor& t) { return t.gelu(); },
       [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }, -4, 4},
      {"abs", [](const Tensor& t) { return t.abs(); }, [](double x) { return std::fabs(x); }, -2,
       2},
      {"neg", [](const Tensor& t) { return -t; }, [](double x) { return -x; }, -2, 2},
      {"reciprocal", [](const Tensor& t) { return t.reciprocal(); }, [](double x) { return 1 / x; },
       0.5, 4},
      {"pow2.5", [](const Tensor& t) { return t.pow(2.5); },
       [](double x) { return std::pow(x, 2.5); }, 0, 3},
  };
  for (const auto& c : cases) {
    Tensor x = tl::linspace(c.lo, c.hi, 101, tl::kFloat64);
    Tensor y = c.op(x);
    Tensor yf = c.op(x.to(tl::kFloat32));
    ASSERT_EQ(y.dtype(), tl::kFloat64) << c.name;
    for (int64_t i = 0; i < 101; ++i) {
      double xi = c.lo + (c.hi - c.lo) * i / 100.0;
      EXPECT_NEAR(get(y, i), c.ref(xi), 1e-12 * std::max(1.0, std::fabs(c.ref(xi))))
          << c.name << " at " << xi;
      EXPECT_NEAR(get(yf, i), c.ref(xi), 1e-5 * std::max(1.0, std::fabs(c.ref(xi))))
          << c.name << " f32 at " << xi;
    }
  }
}

TEST(Elementwise, IntegerInputsToFloatingOpsGiveDefaultDtype) {
  Tensor i = tl::tensor({1, 4, 9});
  Tensor s = i.sqrt();
  EXPECT_EQ(s.dtype(), tl::kFloat32);
  EXPECT_EQ(get(s, 2), 3.0);
  EXPECT_EQ((-i).dtype(), tl::kInt64);
  EXPECT_EQ(tl::tensor({7}).div(2).item<double>(), 3.5);
  EXPECT_EQ(tl::tensor({3}).pow(3).item<int64_t>(), 27);
  EXPECT_THROW(tl::tensor({3}).pow(-1), tl::Error);
}

TEST(Elementwise, HalfAndBFloat16ComputeInFloat) {
  Tensor h = tl::tensor({1.0, 2.0, 1000.0}, tl::kFloat16);
  Tensor r = h * 3;
  EXPECT_EQ(r.dtype(), tl::kFloat16);
  EXPECT_EQ(get(r, 2), 3000.0);
  Tensor b = tl::full({4}, 0.5, tl::kBFloat16).exp();
  EXPECT_NEAR(get(b, 0), std::exp(0.5), 0.01);
}

TEST(Elementwise, InPlaceOpsWriteThroughAndBumpTheVersion) {
  Tensor a = tl::zeros({2, 3});
  Tensor row = a.select(0, 1);
  uint32_t v0 = a._version();
  row.add_(tl::tensor({1.0, 2.0, 3.0}), 2);  // alpha
  EXPECT_EQ(a._version(), v0 + 1);
  EXPECT_EQ(to_vector(a), (std::vector<double>{0, 0, 0, 2, 4, 6}));
  a.mul_(0.5).sub_(1);
  EXPECT_EQ(a._version(), v0 + 3);
  EXPECT_EQ(to_vector(a), (std::vector<double>{-1, -1, -1, 0, 1, 2}));
  a.clamp_(-0.5, 1.5);
  EXPECT_EQ(to_vector(a), (std::vector<double>{-0.5, -0.5, -0.5, 0, 1, 1.5}));
  Tensor b = tl::ones({3});
  EXPECT_THROW(b.add_(tl::ones({2, 3})), tl::Error);           // would need to grow b
  EXPECT_THROW(tl::ones({1}).expand({3}).add_(1), tl::Error);  // overlapping output
}

TEST(Elementwise, ComparisonsWhereClampMaskedFill) {
  Tensor a = tl::tensor({1.0, -2.0, 3.0, 0.5});
  Tensor m = a > 0.75;
  EXPECT_EQ(m.dtype(), tl::kBool);
  EXPECT_EQ(to_vector(m), (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(to_vector(a == tl::tensor({1.0, 0.0, 3.0, 0.0})), (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(to_vector(tl::where(m, a, tl::zeros({1}))), (std::vector<double>{1, 0, 3, 0}));
  EXPECT_EQ(to_vector(tl::where(m, 9, a)), (std::vector<double>{9, -2, 9, 0.5}));
  Tensor ci = tl::tensor({1, 5, 9}).clamp(2.5, std::nullopt);  // int with float bound -> float
  EXPECT_EQ(ci.dtype(), tl::kFloat32);
  EXPECT_EQ(to_vector(ci), (std::vector<double>{2.5, 5, 9}));
  EXPECT_EQ(to_vector(tl::tensor({1, 5, 9}).clamp(std::nullopt, 6)),
            (std::vector<double>{1, 5, 6}));
  Tensor grid = tl::zeros({2, 3});
  Tensor filled = grid.masked_fill(tl::tensor({true, false, true}), -1);  // broadcast mask
  EXPECT_EQ(to_vector(filled), (std::vector<double>{-1, 0, -1, -1, 0, -1}));
  EXPECT_EQ(grid.sum().item<double>(), 0.0);
  EXPECT_THROW(grid.masked_fill(tl::tensor({1, 0, 1}), 0), tl::Error);
}

TEST(Elementwise, BoolOpsFollowPyTorch) {
  Tensor t = tl::tensor({true, false});
  EXPECT_EQ(to_vector(t + t), (std::vector<double>{1, 0}));
  EXPECT_EQ((t + t).dtype(), tl::kBool);
  EXPECT_THROW(t - t, tl::Error);
  EXPECT_THROW(-t, tl::Error);
  EXPECT_EQ((t * 2).dtype(), tl::kInt64);
}

TEST(Elementwise, ScalarOnTheLeft) {
  Tensor a = tl::tensor({1.0, 2.0, 4.0});
  EXPECT_EQ(to_vector(10 - a), (std::vector<double>{9, 8, 6}));
  EXPECT_EQ(to_vector(1 / a), (std::vector<double>{1, 0.5, 0.25}));
  EXPECT_EQ(to_vector(tl::pow(2, a)), (std::vector<double>{2, 4, 16}));
  EXPECT_TRUE(tl::allclose(a * 3, 3 * a));
  EXPECT_FALSE(tl::allclose(a, a + 1e-3));
}

}  // namespace

namespace {
// Large ops are split across threads (Note [Intra-op parallelism]); chunks start mid-row, so
// every element of a big strided, broadcast op is checked against a plain loop.
TEST(ElementwiseParallel, LargeStridedBroadcastOpMatchesPlainLoop) {
  const int64_t rows = 301, cols = 517;  // odd sizes: chunk boundaries fall inside rows
  Tensor a = tl::arange(rows * cols, tl::kFloat64).view({cols, rows}).t();  // [rows, cols]
  Tensor b = tl::arange(cols, tl::kFloat64).mul(0.5);                       // broadcast row
  Tensor r = a * 2 + b;
  Tensor rc = r.contiguous();
  const double* p = rc.data_ptr<double>();
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double a_ij = static_cast<double>(j * rows + i);  // a[i][j] = storage[j * rows + i]
      bad += p[i * cols + j] != a_ij * 2 + 0.5 * j;
    }
  EXPECT_EQ(bad, 0);
  Tensor filled = tl::zeros({rows, cols}).t();
  filled.fill_(3);
  EXPECT_EQ(filled.sum().item<double>(), 3.0 * rows * cols);
}
}  // namespace
