// The chunk merges of split var/std/logsumexp (tensorlib/core/row_moments.h, run by the CUDA
// reductions over few long rows): a row cut into chunks, each reduced in two passes as a CUDA
// block does, merged in chunk order, must give what the CPU kernels give for the whole row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensorlib/core/row_moments.h"
#include "tensorlib/tensorlib.h"

namespace {

using tl::Tensor;
using tl::math::RowMoments;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One chunk's partial, computed in M as the CUDA block does: the mean (or NaN-first maximum),
// then the squared deviations (or the shifted exponentials).
template <typename M>
RowMoments<M> chunk_moments(const std::vector<double>& x, size_t lo, size_t hi, bool lse) {
  M first = lse ? M(-INFINITY) : M(0);
  for (size_t i = lo; i < hi; ++i)
    first = lse ? tl::math::nan_max(M(x[i]), first) : first + M(x[i]);
  if (!lse) first /= M(hi - lo);
  const M shift = lse ? tl::math::lse_shift(first) : first;
  M second = 0;
  for (size_t i = lo; i < hi; ++i) {
    const M d = M(x[i]) - shift;
    second += lse ? std::exp(d) : d * d;
  }
  return {first, second, static_cast<int64_t>(hi - lo)};
}

// var (correction 1), std (correction 0) and logsumexp of x from chunks ending at `cuts`.
template <typename M>
std::vector<double> merged(const std::vector<double>& x, const std::vector<size_t>& cuts) {
  RowMoments<M> var{0, 0, 0}, lse{0, 0, 0};
  size_t lo = 0;
  for (size_t hi : cuts) {
    var = tl::math::merge_var(var, chunk_moments<M>(x, lo, hi, false));
    lse = tl::math::merge_lse(lse, chunk_moments<M>(x, lo, hi, true));
    lo = hi;
  }
  EXPECT_EQ(static_cast<size_t>(var.n), x.size());
  return {double(tl::math::finish_var(var.second, var.n, 1, false)),
          double(tl::math::finish_var(var.second, var.n, 0, true)),
          double(tl::math::finish_lse(lse.first, lse.second))};
}

// The CPU kernels over the whole row: var (unbiased), std (biased), logsumexp.
std::vector<double> whole_row(const std::vector<double>& x) {
  const Tensor t = tl::tensor(x, tl::TensorOptions(tl::kFloat64));
  return {t.var().item<double>(), t.std(false).item<double>(), t.logsumexp({0}).item<double>()};
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                     const std::string& what) {
  const char* names[] = {"var", "std", "logsumexp"};
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE(what + " " + names[k]);
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(got[k])) << got[k];
    } else if (std::isinf(want[k])) {
      EXPECT_EQ(got[k], want[k]);
    } else {
      EXPECT_NEAR(got[k], want[k], rtol * std::max(1.0, std::abs(want[k])));
    }
  }
}

std::vector<double> normals(size_t n, double mean, double sd, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> x(n);
  for (double& v : x) v = d(rng);
  return x;
}

TEST(RowMoments, ChunksMergeToTheWholeRow) {
  const std::vector<double> x = normals(10000, 0.5, 2.0, 1);
  // Uneven chunks, a one-element chunk, and the CUDA plan's equal chunks.
  for (const std::vector<size_t>& cuts :
       {std::vector<size_t>{1, 8, 1000, 10000}, std::vector<size_t>{2500, 5000, 7500, 10000},
        std::vector<size_t>{9999, 10000}, std::vector<size_t>{10000}}) {
    const std::string what = "chunks ending at " + std::to_string(cuts[0]) + "...";
    expect_near_all(merged<double>(x, cuts), whole_row(x), 1e-12, what + " in double");
    expect_near_all(merged<float>(x, cuts), whole_row(x), 1e-5, what + " in float");
  }
}

TEST(RowMoments, VarianceFarFromZeroKeepsItsDigits) {
  // A mean 1e4 standard deviations away: a sum of squares in float would lose every digit;
  // Chan's update over chunk means does not.
  const std::vector<double> x = normals(40000, 1e4, 1.0, 2);
  const std::vector<size_t> cuts = {16384, 32768, 40000};
  expect_near_all(merged<double>(x, cuts), whole_row(x), 1e-10, "double");
  const std::vector<double> f = merged<float>(x, cuts), want = whole_row(x);
  EXPECT_NEAR(f[0], want[0], 1e-2 * want[0]) << "var in float";
}

TEST(RowMoments, InfinitiesAndNaNsAcrossChunks) {
  const std::vector<size_t> cuts = {3, 6, 9};
  struct Case {
    std::string what;
    std::vector<double> x;
  };
  const std::vector<Case> cases = {
      {"a chunk of -inf before very negative values",
       {-kInf, -kInf, -kInf, -1000, -1001, -1002, -1000, -999, -1003}},
      {"all -inf", std::vector<double>(9, -kInf)},
      {"+inf in the last chunk", {1, 2, 3, 4, 5, 6, 7, kInf, 8}},
      {"+inf and -inf", {-kInf, 0, 1, 2, 3, 4, 5, kInf, 8}},
      {"NaN in the last chunk", {1, 2, 3, 4, 5, 6, 7, kNaN, 8}},
      {"NaN in the first chunk, +inf later", {kNaN, 2, 3, 4, kInf, 6, 7, 8, 9}},
      {"large values", {700, 710, 705, 1e3, 990, 995, 3, 4, 5}},
  };
  for (const Case& c : cases) {
    expect_near_all(merged<double>(c.x, cuts), whole_row(c.x), 1e-12, c.what);
  }
}

TEST(RowMoments, CorrectionAtOrBeyondTheCount) {
  // As the CPU and PyTorch: n <= correction gives NaN for M2 == 0 and +inf otherwise.
  EXPECT_TRUE(std::isnan(tl::math::finish_var(0.0, 1, 1, false)));
  EXPECT_EQ(tl::math::finish_var(2.0, 1, 1, false), kInf);
  EXPECT_TRUE(std::isnan(tl::math::finish_var(0.0, 0, 0, false)));
  EXPECT_DOUBLE_EQ(tl::math::finish_var(8.0, 4, 0, true), std::sqrt(2.0));
}

}  // namespace
