// Matrix products (tensorlib/ops/linalg.cpp, the CPU loops in cpu/linalg.cpp) against a naive
// triple loop in double that spells out PyTorch's matmul shape rules independently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensorlib/core/memory.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/expect_error.h"

namespace {

using tl::Tensor;
using Sizes = std::vector<int64_t>;
using Values = std::vector<double>;

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

// A contiguous tensor with small random values from a fixed seed (integers in [-3, 3] for
// integer dtypes, so every product is exact).
Tensor random_tensor(const Sizes& sizes, tl::ScalarType dtype, uint32_t seed) {
  Tensor t = tl::empty(sizes, dtype);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> ints(-3, 3);
  std::uniform_real_distribution<double> reals(-1.0, 1.0);
  TL_DISPATCH_ALL(dtype, "random_tensor", [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(ints(gen));
      } else if constexpr (std::is_same_v<T, double>) {
        p[i] = reals(gen);
      } else {
        p[i] = T(static_cast<float>(reals(gen)));
      }
    }
  });
  return t;
}

struct Reference {
  Sizes sizes;
  Values values;
};

// torch.matmul by its documented rules: a 1-D left operand is a row vector and a 1-D right
// operand a column vector (their dim is removed from the result); batch dims broadcast.
Reference reference_matmul(const Tensor& a, const Tensor& b) {
  const Values av = values_of(a), bv = values_of(b);
  Sizes as = a.sizes().vec(), bs = b.sizes().vec();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Sizes a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(a_batch.size(), b_batch.size());
  Sizes batch(nb), a_pad(nb, 1), b_pad(nb, 1);
  std::copy(a_batch.begin(), a_batch.end(), a_pad.end() - a_batch.size());
  std::copy(b_batch.begin(), b_batch.end(), b_pad.end() - b_batch.size());
  for (size_t d = 0; d < nb; ++d) batch[d] = a_pad[d] == 1 ? b_pad[d] : a_pad[d];

  Reference r;
  int64_t n_batch = 1;
  for (int64_t s : batch) n_batch *= s;
  for (int64_t flat = 0; flat < n_batch; ++flat) {
    // Batch index of this output matrix, then the matching (broadcast) index into a and b.
    int64_t rem = flat, a_mat = 0, b_mat = 0, a_scale = 1, b_scale = 1;
    for (size_t d = nb; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      a_mat += (a_pad[d] == 1 ? 0 : i) * a_scale;
      b_mat += (b_pad[d] == 1 ? 0 : i) * b_scale;
      a_scale *= a_pad[d];
      b_scale *= b_pad[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += av[(a_mat * m + i) * k + p] * bv[(b_mat * k + p) * n + j];
        r.values.push_back(s);
      }
    }
  }
  r.sizes = batch;
  if (!a_vec) r.sizes.push_back(m);
  if (!b_vec) r.sizes.push_back(n);
  return r;
}

void expect_matches(const Tensor& got, const Reference& want, double tol) {
  ASSERT_EQ(got.sizes().vec(), want.sizes);
  const Values v = values_of(got);
  ASSERT_EQ(v.size(), want.values.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], want.values[i], tol * std::max(1.0, std::abs(want.values[i])))
        << "element " << i;
}

using tl_test::error_of;

struct ShapeCase {
  Sizes a, b, out;
};

// Every rule of torch.matmul's documentation, with the result shape it gives.
const std::vector<ShapeCase> kShapeRules = {
    {{3}, {3}, {}},                           // vector . vector: 0-dim dot product
    {{2, 3}, {3, 4}, {2, 4}},                 // matrix @ matrix
    {{3}, {3, 4}, {4}},                       // a 1 is prepended to the vector, then removed
    {{2, 3}, {3}, {2}},                       // matrix @ vector
    {{5, 2, 3}, {3, 4}, {5, 2, 4}},           // batched @ matrix (folds into one product)
    {{5, 2, 3}, {3}, {5, 2}},                 // batched @ vector
    {{3}, {5, 3, 4}, {5, 4}},                 // vector @ batched
    {{2, 3}, {5, 3, 4}, {5, 2, 4}},           // matrix broadcast over b's batch
    {{5, 2, 3}, {5, 3, 4}, {5, 2, 4}},        // bmm
    {{1, 2, 3}, {5, 3, 4}, {5, 2, 4}},        // batch 1 broadcasts
    {{7, 1, 2, 3}, {5, 3, 4}, {7, 5, 2, 4}},  // batch dims broadcast as elementwise ops do
    {{2, 1, 2, 3}, {1, 4, 3, 1}, {2, 4, 2, 1}},
    {{0, 2, 3}, {3, 4}, {0, 2, 4}},  // empty batch
};

TEST(LinalgTest, MatmulShapeRulesFloat64) {
  uint32_t seed = 1;
  for (const ShapeCase& c : kShapeRules) {
    SCOPED_TRACE(::testing::PrintToString(c.a) + " @ " + ::testing::PrintToString(c.b));
    const Tensor a = random_tensor(c.a, tl::kFloat64, seed++);
    const Tensor b = random_tensor(c.b, tl::kFloat64, seed++);
    const Tensor out = tl::matmul(a, b);
    EXPECT_EQ(out.sizes().vec(), c.out);
    EXPECT_EQ(out.dtype(), tl::kFloat64);
    EXPECT_FALSE(out.is_view());
    expect_matches(out, reference_matmul(a, b), 1e-12);
  }
}

TEST(LinalgTest, MatmulShapeRulesOtherDtypes) {
  // float32 through BLAS; the rest through the accumulate-in-acc_t loop.
  const std::vector<std::pair<tl::ScalarType, double>> dtypes = {
      {tl::kFloat32, 1e-5}, {tl::kInt64, 0},      {tl::kInt32, 0},
      {tl::kUInt8, 0},      {tl::kFloat16, 1e-2}, {tl::kBFloat16, 3e-2}};
  uint32_t seed = 100;
  for (const auto& [dtype, tol] : dtypes) {
    for (const ShapeCase& c : kShapeRules) {
      SCOPED_TRACE(std::string(tl::dtype_name(dtype)) + " " + ::testing::PrintToString(c.a) +
                   " @ " + ::testing::PrintToString(c.b));
      const Tensor a = random_tensor(c.a, dtype, seed++);
      const Tensor b = random_tensor(c.b, dtype, seed++);
      const Tensor out = a.matmul(b);
      EXPECT_EQ(out.dtype(), dtype);
      Reference want = reference_matmul(a, b);
      if (dtype == tl::kUInt8) {  // wraps modulo 256, as PyTorch
        for (double& v : want.values) v = double(uint8_t(int64_t(v)));
      }
      expect_matches(out, want, tol);
    }
  }
}

TEST(LinalgTest, TransposedAndStridedViews) {
  for (tl::ScalarType dtype : {tl::kFloat32, tl::kFloat64, tl::kInt64}) {
    SCOPED_TRACE(std::string(tl::dtype_name(dtype)));
    const double tol = dtype == tl::kFloat32 ? 1e-5 : 1e-12;
    // Transposed views BLAS reads in place.
    const Tensor at = random_tensor({4, 3}, dtype, 1).t();
    const Tensor bt = random_tensor({5, 4}, dtype, 2).t();
    ASSERT_EQ(at.strides().vec(), (Sizes{1, 3}));
    expect_matches(tl::mm(at, bt), reference_matmul(at, bt), tol);
    expect_matches(at.mm(random_tensor({4, 5}, dtype, 3)),
                   reference_matmul(at, random_tensor({4, 5}, dtype, 3)), tol);
    // A column step of 2 and a zero stride: layouts BLAS cannot take, copied first.
    const Tensor stepped = random_tensor({3, 8}, dtype, 4).slice(1, 0, 8, 2);
    const Tensor broadcast = random_tensor({4, 1}, dtype, 5).expand({4, 5});
    expect_matches(tl::matmul(stepped, broadcast), reference_matmul(stepped, broadcast), tol);
    // Row slices keep a leading dimension larger than the row length.
    const Tensor rows = random_tensor({3, 6}, dtype, 6).narrow(1, 1, 4);
    expect_matches(tl::matmul(rows, bt), reference_matmul(rows, bt), tol);
    // Batched transposed and batch-broadcast (expanded) operands.
    const Tensor ba = random_tensor({2, 4, 3}, dtype, 7).transpose(1, 2);
    const Tensor bb = random_tensor({1, 4, 2}, dtype, 8).expand({2, 4, 2});
    expect_matches(tl::bmm(ba, bb), reference_matmul(ba, bb), tol);
    expect_matches(tl::matmul(ba, bb), reference_matmul(ba, bb), tol);
    // A batched operand whose batch and row dims cannot be folded into one.
    const Tensor unfoldable = random_tensor({3, 2, 4}, dtype, 9).transpose(0, 1);
    const Tensor m = random_tensor({4, 2}, dtype, 10);
    expect_matches(tl::matmul(unfoldable, m), reference_matmul(unfoldable, m), tol);
    // Vector operands that are strided views.
    const Tensor v = random_tensor({8}, dtype, 11).slice(0, 0, 8, 2);
    expect_matches(tl::matmul(v, v), reference_matmul(v, v), tol);
    expect_matches(tl::matmul(bt.t(), v), reference_matmul(bt.t(), v), tol);
  }
}

TEST(LinalgTest, LargerFloat32AgainstDoubleReference) {
  const Tensor a = random_tensor({65, 70}, tl::kFloat32, 20);
  const Tensor b = random_tensor({70, 33}, tl::kFloat32, 21);
  expect_matches(tl::matmul(a, b), reference_matmul(a, b), 1e-5);
  expect_matches(tl::matmul(b.t(), a.t()), reference_matmul(b.t(), a.t()), 1e-5);
}

TEST(LinalgTest, EmptyInnerDimensionGivesZeros) {
  const Tensor a = tl::empty({2, 0}, tl::kFloat32);
  const Tensor b = tl::empty({0, 3}, tl::kFloat32);
  const Tensor out = tl::mm(a, b);
  EXPECT_EQ(out.sizes().vec(), (Sizes{2, 3}));
  EXPECT_EQ(values_of(out), Values(6, 0.0));
  EXPECT_EQ(tl::matmul(tl::empty({0}, tl::kInt64), tl::empty({0}, tl::kInt64)).item<int64_t>(), 0);
  EXPECT_EQ(tl::mm(tl::empty({0, 4}), tl::empty({4, 3})).sizes().vec(), (Sizes{0, 3}));
}

TEST(LinalgTest, Addmm) {
  const Tensor m1 = random_tensor({3, 4}, tl::kFloat64, 30);
  const Tensor m2 = random_tensor({4, 2}, tl::kFloat64, 31);
  const Tensor bias = random_tensor({2}, tl::kFloat64, 32);  // broadcast over rows
  const Tensor out = tl::addmm(bias, m1, m2, 0.5, 2.0);
  const Reference prod = reference_matmul(m1, m2);
  const Values bv = values_of(bias), got = values_of(out);
  ASSERT_EQ(out.sizes().vec(), (Sizes{3, 2}));
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], 0.5 * bv[i % 2] + 2.0 * prod.values[i], 1e-12);

  // beta = 0 ignores the input entirely, nan included.
  const Tensor nan_input = tl::full({3, 2}, std::nan(""), tl::kFloat64);
  expect_matches(tl::addmm(nan_input, m1, m2, 0, 1), prod, 1e-12);

  // The loop path honours alpha and beta too.
  const Tensor i1 = tl::tensor({{1, 2}, {3, 4}});
  const Tensor i2 = tl::tensor({{1, 0}, {0, 1}});
  EXPECT_EQ(values_of(tl::addmm(tl::ones({2, 2}, tl::kInt64), i1, i2, 3, 2)),
            (Values{5, 7, 9, 11}));
}

TEST(LinalgTest, ErrorMessages) {
  const Tensor a = tl::zeros({2, 3}), b = tl::zeros({4, 5});
  EXPECT_NE(error_of([&] {
              tl::mm(a, b);
            }).find("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(a, b);
            }).find("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(tl::zeros({}), a);
            }).find("both arguments to matmul need to be at least 1D, but they are 0D and 2D"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(tl::zeros({3}), tl::zeros({4}));
            }).find("inconsistent tensor size"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(a, tl::zeros({4}));
            }).find("size mismatch, got input (2), mat (2x3), vec (4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(tl::zeros({4}), a);
            }).find("shapes cannot be multiplied (1x4 and 2x3)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::matmul(tl::zeros({5, 2, 3}), tl::zeros({5, 4, 2}));
            }).find("shapes cannot be multiplied"),
            std::string::npos);
  EXPECT_THROW(tl::matmul(tl::zeros({2, 2, 3}), tl::zeros({3, 3, 4})), tl::Error);  // batch 2 vs 3
  EXPECT_NE(error_of([&] {
              tl::mm(a, tl::zeros({3, 2}, tl::kFloat64));
            }).find("same dtype"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tl::mm(tl::zeros({2}), a); }).find("must be a matrix"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tl::bmm(tl::zeros({2, 2, 3}), tl::zeros({3, 3, 4}));
            })
                .find("Expected size for first two dimensions of batch2 tensor to be: [2, 3] "
                      "but got: [3, 3]"),
            std::string::npos);
  EXPECT_THROW(tl::bmm(a, b), tl::Error);
  EXPECT_THROW(tl::addmm(tl::zeros({3}), a, tl::zeros({3, 2})),
               tl::Error);  // bias not broadcastable
}

// Note [Gradient layout]: Linear computes x @ W.t(); the gradient of W comes out contiguous,
// so accumulating it into W.grad copies nothing. Values against the formula dW = g^T x.
TEST(LinalgTest, GradientOfATransposedOperandKeepsTheWeightsLayout) {
  tl::manual_seed(4);
  Tensor w = tl::randn({4, 3}, tl::kFloat64).requires_grad_();
  Tensor x = tl::randn({5, 3}, tl::kFloat64).requires_grad_();
  Tensor gy = tl::randn({5, 4}, tl::kFloat64);
  Tensor y = tl::matmul(x, w.t());
  const auto before = tl::memory_stats()["allocation.all.allocated"];
  y.backward(gy);
  // dW and dx: two allocations; a copy of a transposed dW would be a third.
  EXPECT_EQ(tl::memory_stats()["allocation.all.allocated"] - before, 2);
  EXPECT_TRUE(w.grad().is_contiguous());
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 3; ++i) {
      double expect = 0;
      for (int64_t n = 0; n < 5; ++n) expect += gy[n][o].item<double>() * x[n][i].item<double>();
      EXPECT_NEAR(w.grad()[o][i].item<double>(), expect, 1e-12);
    }
  // dx = g W.
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t i = 0; i < 3; ++i) {
      double expect = 0;
      for (int64_t o = 0; o < 4; ++o) expect += gy[n][o].item<double>() * w[o][i].item<double>();
      EXPECT_NEAR(x.grad()[n][i].item<double>(), expect, 1e-12);
    }
}

}  // namespace
