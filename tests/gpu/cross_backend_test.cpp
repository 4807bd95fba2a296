// The cross-backend op test: every op with CUDA kernels runs on the CPU and on the GPU from
// the same inputs (contiguous, transposed, sliced with a step, broadcast, 0-dim), every dtype
// it accepts, and the results must agree within a tolerance. Gradients through autograd are
// compared the same way. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "tensorlib/core/memory.h"
#include "tensorlib/cuda/kernel_args.h"
#include "tensorlib/nn/conv.h"
#include "tensorlib/nn/pooling.h"
#include "tensorlib/nn/upsample.h"
#include "tensorlib/tensorlib.h"

namespace tl {
namespace {

const Device kGpu("cuda:0");
using Op = std::function<Tensor(const std::vector<Tensor>&)>;

const std::vector<ScalarType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<ScalarType> kAll = {kBool,    kUInt8,    kInt32,   kInt64,
                                      kFloat16, kBFloat16, kFloat32, kFloat64};

// Tolerances per dtype: the GPU accumulates in float (opmath) where the CPU uses double.
double rtol_of(ScalarType t) {
  switch (t) {
    case kFloat16:
      return 2e-2;
    case kBFloat16:
      return 5e-2;
    case kFloat32:
      return 1e-4;
    default:
      return 1e-9;
  }
}

// A layout an input is viewed through, applied identically on both devices.
enum class Layout { contiguous, transposed, stepped, expanded };
const std::vector<Layout> kLayouts = {Layout::contiguous, Layout::transposed, Layout::stepped,
                                      Layout::expanded};

// A [4, 6] view of `base` ([12, 8] values) in the given layout.
Tensor view_as(const Tensor& base, Layout l) {
  switch (l) {
    case Layout::contiguous:
      return base.slice(0, 0, 4).slice(1, 0, 6).contiguous();
    case Layout::transposed:
      return base.slice(0, 0, 6).slice(1, 0, 4).t();
    case Layout::stepped:
      return base.slice(0, 0, 12, 3).slice(1, 0, 6);
    case Layout::expanded:
      return base.slice(0, 0, 1).slice(1, 0, 6).expand({4, 6});
  }
  return base;
}

std::string layout_name(Layout l) {
  const char* names[] = {"contiguous", "transposed", "stepped", "expanded"};
  return names[static_cast<int>(l)];
}

// Values for a dtype: small integers for integer types, normals otherwise (positive when
// `positive`, for log and sqrt).
Tensor values(IntArrayRef sizes, ScalarType dt, bool positive = false, uint64_t seed = 1) {
  manual_seed(seed);
  Tensor v = randn(sizes, TensorOptions(kFloat64));
  if (positive) v = v.abs() + 0.1;
  if (dt == kBool) return v > 0;
  if (!is_floating_point(dt)) return (v * 3).clamp(positive ? 0 : -9, 9).to(dt);
  return v.to(dt);
}

::testing::AssertionResult close(const Tensor& cpu, const Tensor& gpu, double rtol, double atol) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "result not on the GPU";
  Tensor g = gpu.cpu();
  if (cpu.sizes() != g.sizes())
    return ::testing::AssertionFailure() << "shapes " << cpu.sizes() << " vs " << g.sizes();
  if (cpu.dtype() != g.dtype())
    return ::testing::AssertionFailure() << "dtypes " << cpu.dtype() << " vs " << g.dtype();
  Tensor a = cpu.to(kFloat64), b = g.to(kFloat64);
  // NaN where the CPU has NaN is agreement.
  Tensor nan_a = a.ne(a), nan_b = b.ne(b);
  if (!equal(nan_a, nan_b)) return ::testing::AssertionFailure() << "NaN positions differ";
  a = a.masked_fill(nan_a, 0);
  b = b.masked_fill(nan_b, 0);
  if (allclose(b, a, rtol, atol)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max abs difference " << (a - b).abs().max().item<double>() << "\ncpu: " << cpu
         << "\ngpu: " << g;
}

// Runs op on the CPU inputs and on their GPU copies (viewed through the same layouts).
void check(const std::string& what, const std::vector<Tensor>& bases,
           const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& view, const Op& op,
           double rtol, double atol = 1e-6) {
  SCOPED_TRACE(what);
  std::vector<Tensor> on_gpu;
  for (const Tensor& b : bases) on_gpu.push_back(b.to(kGpu));
  Tensor expected = op(view(bases));
  Tensor got = op(view(on_gpu));
  EXPECT_TRUE(close(expected, got, rtol, atol));
}

auto identity = [](const std::vector<Tensor>& v) { return v; };

TEST(CrossBackend, UnaryOps) {
  TL_REQUIRE_GPU();
  const std::vector<std::pair<std::string, Op>> float_ops = {
      {"exp", [](auto& v) { return v[0].exp(); }},
      {"log", [](auto& v) { return v[0].log(); }},
      {"sqrt", [](auto& v) { return v[0].sqrt(); }},
      {"rsqrt", [](auto& v) { return v[0].rsqrt(); }},
      {"sin", [](auto& v) { return v[0].sin(); }},
      {"cos", [](auto& v) { return v[0].cos(); }},
      {"tanh", [](auto& v) { return v[0].tanh(); }},
      {"sigmoid", [](auto& v) { return v[0].sigmoid(); }},
      {"gelu", [](auto& v) { return v[0].gelu(); }},
      {"reciprocal", [](auto& v) { return v[0].reciprocal(); }},
  };
  for (ScalarType dt : kFloats) {
    for (Layout l : kLayouts) {
      Tensor base = values({12, 8}, dt, /*positive=*/true);
      auto view = [l](const std::vector<Tensor>& v) {
        return std::vector<Tensor>{view_as(v[0], l)};
      };
      for (auto& [name, op] : float_ops)
        check(name + " " + std::string(dtype_name(dt)) + " " + layout_name(l), {base}, view, op,
              rtol_of(dt));
    }
  }
  for (ScalarType dt : kAll) {
    Tensor base = values({12, 8}, dt);
    for (Layout l : kLayouts) {
      auto view = [l](const std::vector<Tensor>& v) {
        return std::vector<Tensor>{view_as(v[0], l)};
      };
      const std::string suffix = " " + std::string(dtype_name(dt)) + " " + layout_name(l);
      if (dt != kBool)
        check(
            "neg" + suffix, {base}, view, [](auto& v) { return -v[0]; }, rtol_of(dt));
      check(
          "abs" + suffix, {base}, view, [](auto& v) { return v[0].abs(); }, rtol_of(dt));
      check(
          "relu" + suffix, {base}, view, [](auto& v) { return v[0].relu(); }, rtol_of(dt));
    }
    // integer inputs of float ops go to the default dtype
    if (!is_floating_point(dt))
      check(
          "exp of " + std::string(dtype_name(dt)), {values({12, 8}, dt, true)}, identity,
          [](auto& v) { return v[0].exp(); }, 1e-5);
  }
  // In place on a strided view.
  check(
      "exp_ on a view", {values({12, 8}, kFloat32)}, identity,
      [](auto& v) {
        Tensor t = v[0].clone();
        t.slice(1, 0, 8, 2).exp_();
        t.t().slice(0, 1, 3).relu_();
        return t;
      },
      1e-5);
}

TEST(CrossBackend, BinaryOpsBroadcastAndPromote) {
  TL_REQUIRE_GPU();
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](auto& v) { return v[0] + v[1]; }},
      {"add alpha", [](auto& v) { return tl::add(v[0], v[1], 2); }},
      {"sub", [](auto& v) { return v[0] - v[1]; }},
      {"mul", [](auto& v) { return v[0] * v[1]; }},
      {"div", [](auto& v) { return v[0] / v[1]; }},
      {"eq", [](auto& v) { return v[0] == v[1]; }},
      {"ne", [](auto& v) { return v[0] != v[1]; }},
      {"lt", [](auto& v) { return v[0] < v[1]; }},
      {"le", [](auto& v) { return v[0] <= v[1]; }},
      {"gt", [](auto& v) { return v[0] > v[1]; }},
      {"ge", [](auto& v) { return v[0] >= v[1]; }},
  };
  for (ScalarType da : kAll) {
    for (ScalarType db : {da, kFloat32, kInt64}) {
      // [3, 1, 5] with [4, 5] broadcasts to [3, 4, 5]; b is a transposed view.
      Tensor a = values({3, 1, 5}, da, false, 2), b = values({5, 4}, db, true, 3);
      auto view = [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0], v[1].t()}; };
      for (auto& [name, op] : ops) {
        if ((name == "sub" || name == "add alpha") && da == kBool && db == kBool) continue;
        if (name == "add alpha" && is_floating_point(da) != is_floating_point(db)) continue;
        const ScalarType rt = result_type(a, b);
        check(name + " " + std::string(dtype_name(da)) + "," + std::string(dtype_name(db)), {a, b},
              view, op, std::max(rtol_of(rt), rtol_of(da)));
      }
    }
  }
  check(
      "pow int", {values({4, 6}, kInt64, true), values({4, 6}, kInt64, true, 5)}, identity,
      [](auto& v) { return v[0].pow(v[1]); }, 0);
  check(
      "pow float", {values({4, 6}, kFloat32, true), values({4, 6}, kFloat32, false, 5)}, identity,
      [](auto& v) { return v[0].pow(v[1]); }, 1e-5);
  check(
      "pow scalar", {values({4, 6}, kFloat32, true)}, identity,
      [](auto& v) { return v[0].pow(2.5) + tl::pow(2.0, v[0]); }, 1e-5);
  // Numbers and 0-dim CPU tensors next to CUDA tensors.
  check(
      "scalars", {values({4, 6}, kFloat16)}, identity,
      [](auto& v) { return (v[0] * 3 + 1.5 - v[0] / 2) > 0.25; }, 0);
  check(
      "rsub rdiv", {values({4, 6}, kFloat32, true)}, identity,
      [](auto& v) { return (2 - v[0]) + (1 / v[0]); }, 1e-5);
  check(
      "0-dim CPU operand", {values({4, 6}, kFloat32)}, identity,
      [](auto& v) { return v[0] * tensor({2.5}).view({}) + full({}, 3, TensorOptions(kInt64)); },
      1e-6);
  // In-place forms, with type conversion into self and on strided views.
  check(
      "in place", {values({6, 8}, kFloat32), values({8}, kInt32)}, identity,
      [](auto& v) {
        Tensor t = v[0].clone();
        t.t().slice(0, 0, 4).add_(1);
        t.slice(1, 0, 8, 2).mul_(v[1].slice(0, 0, 4));
        t.div_(3).sub_(v[1], 0.5);
        Tensor i = v[1].clone();
        i.add_(v[1] > 0);
        return t + i;
      },
      1e-5);
}

TEST(CrossBackend, WhereClampMaskedFillCopiesFills) {
  TL_REQUIRE_GPU();
  for (ScalarType dt : kAll) {
    const std::string name(dtype_name(dt));
    Tensor x = values({12, 8}, dt, false, 4), y = values({8}, dt, false, 5);
    Tensor mask = values({12, 8}, kBool, false, 6);
    check(
        "where " + name, {mask, x, y}, identity,
        [](auto& v) { return tl::where(v[0].t(), v[1].t(), v[2].unsqueeze(1)); }, 0);
    check(
        "where scalar " + name, {mask, x}, identity,
        [](auto& v) { return tl::where(v[0], v[1], 1); }, 0);
    if (dt != kBool) {
      check(
          "clamp " + name, {x}, identity, [](auto& v) { return v[0].clamp(-1, 2); }, 0);
      check(
          "clamp min " + name, {x}, identity, [](auto& v) { return v[0].t().clamp(0); }, 0);
    }
    check(
        "masked_fill " + name, {x, mask}, identity,
        [](auto& v) { return v[0].t().masked_fill(v[1].t(), 1); }, 0);
    check(
        "masked_fill broadcast " + name, {x, mask}, identity,
        [](auto& v) { return v[0].masked_fill(v[1].select(0, 0), 0); }, 0);
    for (ScalarType to : kAll)
      check(
          "copy " + name + " to " + std::string(dtype_name(to)), {x}, identity,
          [to](auto& v) { return v[0].abs().t().to(to); }, rtol_of(to));
    check(
        "fill " + name, {x}, identity,
        [](auto& v) {
          Tensor t = v[0].clone();
          t.slice(1, 1, 8, 3).fill_(1);
          t.t().select(0, 0).zero_();
          return t;
        },
        0);
  }
  // A bool tensor filled with a non-integral, NaN or infinite number is true (Scalar::to<bool>).
  for (double v : {0.5, std::nan(""), double(INFINITY), -0.25}) {
    check(
        "bool fill " + std::to_string(v), {values({3, 4}, kBool, false, 2)}, identity,
        [v](auto& t) {
          Tensor r = t[0].clone();
          r.fill_(v);
          return r;
        },
        0);
    check(
        "bool masked_fill " + std::to_string(v), {values({3, 4}, kBool, false, 2)}, identity,
        [v](auto& t) { return t[0].masked_fill(t[0].eq(false), v); }, 0);
  }
  // NaN propagates through clamp.
  check(
      "clamp nan", {tensor({1.0, std::nan(""), -3.0})}, identity,
      [](auto& v) { return v[0].clamp(-1, 0.5); }, 0);
}

TEST(CrossBackend, Reductions) {
  TL_REQUIRE_GPU();
  for (ScalarType dt : kAll) {
    const std::string name(dtype_name(dt));
    // [6, 5, 300] rows of 5, 300, 1500 and 9000 elements (warp and block paths).
    Tensor x = values({6, 5, 300}, dt, false, 7);
    const double rt = std::max(rtol_of(dt), 1e-5);
    for (std::vector<int64_t> dims :
         std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}, {-1, 1}}) {
      std::string d = name + " dims " + std::to_string(dims.size());
      for (bool keep : {false, true}) {
        check(
            "sum " + d, {x}, identity, [&](auto& v) { return v[0].sum(dims, keep); }, rt, 1e-3);
        if (is_floating_point(dt)) {
          check(
              "mean " + d, {x}, identity, [&](auto& v) { return v[0].mean(dims, keep); }, rt, 1e-4);
          check(
              "var " + d, {x}, identity, [&](auto& v) { return v[0].var(dims, true, keep); }, rt,
              1e-4);
          check(
              "std " + d, {x}, identity, [&](auto& v) { return v[0].std(dims, false, keep); }, rt,
              1e-4);
          check(
              "logsumexp " + d, {x}, identity, [&](auto& v) { return v[0].logsumexp(dims, keep); },
              rt, 1e-4);
        }
      }
    }
    for (int64_t dim : {0, 1, 2}) {
      const std::string d = name + " dim " + std::to_string(dim);
      check(
          "max dim " + d, {x}, identity,
          [&](auto& v) {
            auto [values_, indices] = v[0].transpose(0, 2).max(dim, true);
            return values_.to(kFloat64) + indices.to(kFloat64) * 1000;
          },
          rt);
      check(
          "min dim " + d, {x}, identity,
          [&](auto& v) {
            auto [values_, indices] = v[0].min(dim);
            return values_.to(kFloat64) + indices.to(kFloat64) * 1000;
          },
          rt);
      check(
          "argmax " + d, {x}, identity, [&](auto& v) { return v[0].argmax(dim); }, 0);
      check(
          "argmin " + d, {x}, identity, [&](auto& v) { return v[0].argmin(dim, true); }, 0);
      if (is_floating_point(dt)) {
        check(
            "softmax " + d, {x}, identity, [&](auto& v) { return v[0].softmax(dim); }, rt, 1e-5);
        check(
            "log_softmax " + d, {x}, identity, [&](auto& v) { return v[0].log_softmax(dim); }, rt,
            1e-4);
      }
    }
    check(
        "max all " + name, {x}, identity, [](auto& v) { return v[0].max(); }, rt);
    check(
        "argmax all " + name, {x}, identity, [](auto& v) { return v[0].argmax(); }, 0);
    if (dt != kBool)
      check(
          "prod " + name, {values({4, 6}, dt, true)}, identity,
          [](auto& v) { return v[0].prod(1); }, rt);
  }
  // Ties keep the first position, NaN wins.
  check(
      "ties and nan", {tensor({1.0, 3.0, 3.0, 2.0, std::nan(""), 0.0}).view({2, 3})}, identity,
      [](auto& v) { return v[0].argmax(1) * 10 + v[0].argmin(1); }, 0);
  check(
      "sum to dtype", {values({4, 6}, kInt32)}, identity,
      [](auto& v) { return v[0].sum({1}, false, kFloat64) + v[0].sum().to(kFloat64); }, 0);
}

// Note [Split full reductions]: few long rows run as (row, chunk) blocks plus a combine pass;
// the results must match the CPU, keep first-index ties and NaN, and not vary between runs.
TEST(CrossBackend, LongRowsSplitAcrossBlocks) {
  TL_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 22) + 5;  // one row of a full reduction: 256 chunks
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kInt64, kUInt8}) {
    const std::string name(dtype_name(dt));
    Tensor x = values({n}, dt, false, 31);
    const double rt = is_floating_point(dt) ? std::max(rtol_of(dt), 1e-4) : 0;
    check(
        "sum all " + name, {x}, identity, [](auto& v) { return v[0].sum().to(kFloat64); }, rt,
        1e-2);
    if (is_floating_point(dt))
      check(
          "mean all " + name, {x}, identity, [](auto& v) { return v[0].mean().to(kFloat64); }, rt,
          1e-5);
    if (is_floating_point(dt)) {  // chunks merged as (mean, M2) and (max, shifted sum)
      check(
          "var/std/logsumexp all " + name, {x}, identity,
          [](auto& v) {
            return tl::stack({v[0].var().to(kFloat64), v[0].std(false).to(kFloat64),
                              v[0].logsumexp({0}).to(kFloat64)});
          },
          rt, 1e-5);
      check(
          "var far from zero " + name, {x}, identity,
          [](auto& v) { return (v[0].to(kFloat32) + 1000).var().to(kFloat64); }, 1e-3);
    }
    check(
        "max/min/argmax/argmin all " + name, {x}, identity,
        [](auto& v) {
          return tl::stack({v[0].max().to(kFloat64), v[0].min().to(kFloat64),
                            v[0].argmax().to(kFloat64), v[0].argmin().to(kFloat64)});
        },
        0);
    check(
        "three long rows " + name, {x.slice(0, 0, 3 * 40000).view({3, 40000})}, identity,
        [](auto& v) {
          auto [mx, at] = v[0].max(1);
          return tl::cat({v[0].sum({1}).to(kFloat64), mx.to(kFloat64), at.to(kFloat64),
                          v[0].argmin(1).to(kFloat64)});
        },
        rt, 1e-2);
  }
  // A tie across chunks keeps the first position; a NaN in a late chunk wins.
  Tensor t = zeros({n});
  t.slice(0, 100, 101).fill_(7);
  t.slice(0, n - 10, n - 9).fill_(7);
  check(
      "first of tied maxima", {t}, identity, [](auto& v) { return v[0].argmax(); }, 0);
  t.slice(0, n - 3, n - 2).fill_(std::nan(""));
  check(
      "NaN in the last chunk", {t}, identity,
      [](auto& v) {
        auto [mx, at] = v[0].max(0);
        return at;
      },
      0);
  // logsumexp over chunks: -inf chunks next to very negative ones, a +inf, a NaN.
  Tensor e = full({n}, -1000.0);
  e.slice(0, 0, 40000).fill_(-std::numeric_limits<double>::infinity());
  check(
      "logsumexp of -inf and -1000", {e}, identity, [](auto& v) { return v[0].logsumexp({0}); },
      1e-6);
  e.slice(0, n - 5, n - 4).fill_(std::numeric_limits<double>::infinity());
  check(
      "logsumexp with +inf late", {e}, identity, [](auto& v) { return v[0].logsumexp({0}); }, 0);
  check(
      "var with NaN in the last chunk", {t}, identity, [](auto& v) { return v[0].var(); }, 0);
  // Deterministic: the same bits twice.
  Tensor g = randn({n}, TensorOptions(kFloat32).device(kGpu));
  EXPECT_EQ(g.sum().item<float>(), g.sum().item<float>());
  EXPECT_EQ(g.var().item<float>(), g.var().item<float>());
}

// The split plan runs everywhere (no device needed): few long rows split, many or short rows
// not, and never more than kMaxSplitBlocks blocks.
TEST(CrossBackend, SplitPlanForLongRows) {
  using cuda::kernels::reduce_chunks;
  EXPECT_EQ(reduce_chunks(1, int64_t{1} << 22), 256);
  EXPECT_EQ(reduce_chunks(1, int64_t{1} << 30), cuda::kernels::kMaxSplitBlocks);
  EXPECT_EQ(reduce_chunks(3, 40000), 2);
  EXPECT_EQ(reduce_chunks(1, 20000), 1);
  EXPECT_EQ(reduce_chunks(5000, int64_t{1} << 20), 1);
  EXPECT_EQ(reduce_chunks(0, int64_t{1} << 22), 1);
  for (int64_t rows : {1, 2, 7, 100, 1024})
    EXPECT_LE(rows * reduce_chunks(rows, int64_t{1} << 26), cuda::kernels::kMaxSplitBlocks);
}

TEST(CrossBackend, MatrixProducts) {
  TL_REQUIRE_GPU();
  // Floats through cuBLAS, integers through the tiled kernel (int_gemm.cu), exact.
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kUInt8, kInt32, kInt64}) {
    const std::string name(dtype_name(dt));
    const double rt = !is_floating_point(dt) ? 0
                      : dt == kFloat64       ? 1e-9
                                             : (dt == kFloat32 ? 1e-4 : 3e-2);
    Tensor a = values({7, 5}, dt, false, 8), b = values({5, 3}, dt, false, 9);
    check(
        "mm " + name, {a, b}, identity, [](auto& v) { return v[0].mm(v[1]); }, rt, 1e-3);
    check(
        "mm transposed " + name, {a, b}, identity, [](auto& v) { return v[1].t().mm(v[0].t()); },
        rt, 1e-3);
    check(
        "mm stepped " + name, {values({14, 5}, dt), b}, identity,
        [](auto& v) { return v[0].slice(0, 0, 14, 2).mm(v[1]); }, rt, 1e-3);
    check(
        "addmm " + name, {a, b, values({3}, dt)}, identity,
        [](auto& v) { return tl::addmm(v[2], v[0], v[1], 0.5, 2); }, rt, 1e-3);
    check(
        "bmm " + name, {values({4, 7, 5}, dt), values({4, 5, 3}, dt)}, identity,
        [](auto& v) { return v[0].bmm(v[1]); }, rt, 1e-3);
    check(
        "matmul broadcast " + name, {values({2, 1, 7, 5}, dt), values({3, 5, 3}, dt)}, identity,
        [](auto& v) { return v[0].matmul(v[1]); }, rt, 1e-3);
    check(
        "matmul vector " + name, {a, values({5}, dt)}, identity,
        [](auto& v) { return v[0].matmul(v[1]) + v[1].matmul(v[1]); }, rt, 1e-3);
    check(
        "matmul batch x matrix " + name, {values({4, 7, 5}, dt), b}, identity,
        [](auto& v) { return v[0].transpose(0, 1).matmul(v[1]); }, rt, 1e-3);
    if (!is_floating_point(dt))  // several tiles, k not a multiple of the tile
      check(
          "mm tiles " + name, {values({37, 45}, dt), values({19, 45}, dt)}, identity,
          [](auto& v) { return v[0].mm(v[1].t()); }, 0, 0);
  }
}

TEST(CrossBackend, Indexing) {
  TL_REQUIRE_GPU();
  for (ScalarType dt : kAll) {
    const std::string name(dtype_name(dt));
    Tensor x = values({6, 5, 4}, dt, false, 12);
    Tensor idx = tensor(std::vector<int64_t>{4, 0, 2, 2});
    check(
        "index_select " + name, {x, idx}, identity,
        [](auto& v) { return v[0].index_select(1, v[1]); }, rtol_of(dt));
    check(
        "gather " + name, {x, values({6, 3, 4}, kInt64, true, 13).clamp(0, 4)}, identity,
        [](auto& v) { return v[0].transpose(0, 2).gather(1, v[1].transpose(0, 2)); }, 0);
    check(
        "cat " + name, {x}, identity,
        [](auto& v) {
          return tl::cat({v[0], v[0].slice(1, 0, 5, 2)}, 1);
        },
        0);
    check(
        "nonzero " + name, {x}, identity, [](auto& v) { return v[0].transpose(0, 2).nonzero(); },
        0);
    check(
        "masked_select " + name, {x}, identity,
        [](auto& v) { return v[0].masked_select(v[0].select(2, 1).unsqueeze(2).ne(0)); }, 0);
    // Byte dtypes through 32-bit compare-and-swap (uint8 wraps) and atomic or (bool).
    check(
        "scatter_add " + name, {x, values({6, 3, 4}, kInt64, true, 14).clamp(0, 4)}, identity,
        [](auto& v) {
          Tensor src = v[0].slice(1, 0, 3);
          return v[0].clone().scatter_add_(1, v[1], src);
        },
        rtol_of(dt));
  }
  // Many adds into the neighbouring bytes of one word: 300 ones into each of 4 uint8 counters
  // wrap to 300 mod 256 = 44; bool ORs.
  std::vector<int64_t> positions(1200);
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i % 4);
  Tensor idx = tensor(positions);
  check(
      "scatter_add into adjacent bytes", {idx}, identity,
      [](auto& v) {
        const TensorOptions u8 = TensorOptions(kUInt8).device(v[0].device());
        Tensor counts = zeros({4}, u8).scatter_add_(0, v[0], ones({1200}, u8));
        Tensor flags = zeros({4}, TensorOptions(kBool).device(v[0].device()))
                           .scatter_add_(0, v[0], (v[0] == 2));
        return counts.to(kInt64) * 10 + flags.to(kInt64);
      },
      0);
}

TEST(CrossBackend, DataDependentOpsAreSyncPoints) {
  TL_REQUIRE_GPU();
  Tensor x = tensor({0.0, 1.5, 0.0, -2.0}).to(kGpu);
  gpu_test::EventLog log;
  Tensor nz = x.nonzero();
  auto syncs = log.of(gpu_test::ev::Kind::sync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].sync.kind, gpu_test::ev::SyncKind::data_dependent);
  EXPECT_TRUE(nz.is_cuda());
  EXPECT_EQ(nz.size(0), 2);
  log.clear();
  Tensor sel = x.masked_select(x > 0);
  syncs = log.of(gpu_test::ev::Kind::sync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].sync.kind, gpu_test::ev::SyncKind::data_dependent);
  EXPECT_EQ(sel.numel(), 1);
  log.clear();
  (void)(x * 2 + 1).sum({0});  // ops with known sizes never wait
  EXPECT_TRUE(log.of(gpu_test::ev::Kind::sync).empty());
}

TEST(CrossBackend, GradientsThroughAutograd) {
  TL_REQUIRE_GPU();
  auto grads = [](Device device) {
    manual_seed(11);
    Tensor x = randn({16, 10}).to(device);
    Tensor w1 = randn({32, 10}).mul(0.3).to(device).requires_grad_(true);
    Tensor b1 = zeros({32}).to(device).requires_grad_(true);
    Tensor w2 = randn({4, 32}).mul(0.3).to(device).requires_grad_(true);
    std::vector<int64_t> labels(16);
    for (int64_t i = 0; i < 16; ++i) labels[i] = (i * 7) % 4;
    Tensor target = tensor(labels).to(device);
    Tensor classes = arange(4, TensorOptions(kInt64)).to(device);
    Tensor h = tl::addmm(b1, x, w1.t()).gelu();
    Tensor logits = h.matmul(w2.t()).clamp(-5, 5);
    Tensor logp = logits.log_softmax(1);
    Tensor picked = tl::where(target.view({16, 1}) == classes.view({1, 4}), logp, 0).sum(1);
    Tensor loss = -picked.mean() + (h.sigmoid() * h.tanh()).var() + logits.logsumexp({1}).mean();
    loss.backward();
    return std::vector<Tensor>{loss.detach(), w1.grad(), b1.grad(), w2.grad()};
  };
  std::vector<Tensor> c = grads(Device(kCPU)), g = grads(kGpu);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_TRUE(close(c[i], g[i], 1e-4, 1e-5)) << i;
}

TEST(CrossBackend, ConvolutionAndMaxPooling) {
  TL_REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const std::string name(dtype_name(dt));
    const double rt = dt == kFloat64 ? 1e-9 : 1e-4;
    Tensor x = values({2, 4, 9, 8}, dt, false, 15), w = values({6, 2, 3, 3}, dt, false, 16);
    Tensor b = values({6}, dt, false, 17);
    check(
        "conv2d groups stride padding dilation " + name, {x, w, b}, identity,
        [](auto& v) {
          return nn::functional::conv2d(v[0], v[1], v[2], {2, 1}, {1, 2}, {1, 2}, 2);
        },
        rt, 1e-4);
    check(
        "conv2d no bias, strided input " + name, {x, values({5, 4, 2, 2}, dt)}, identity,
        [](auto& v) { return nn::functional::conv2d(v[0].transpose(2, 3), v[1]); }, rt, 1e-4);
    check(
        "max_pool2d " + name, {x}, identity,
        [](auto& v) {
          auto [out, idx] = nn::functional::max_pool2d_with_indices(v[0], 3, 2, 1, 1, true);
          return out.to(kFloat64) + idx.to(kFloat64) * 1000;
        },
        rt);
    // Gradients of both.
    check(
        "conv2d + max_pool2d gradients " + name, {x, w, b}, identity,
        [](auto& v) {
          Tensor xi = v[0].clone().requires_grad_(true), wi = v[1].clone().requires_grad_(true);
          Tensor y =
              nn::functional::max_pool2d(nn::functional::conv2d(xi, wi, v[2], 1, 1, 1, 2), 2);
          (y * y).sum().backward();
          return tl::cat({xi.grad().reshape({-1}), wi.grad().reshape({-1})});
        },
        rt, 1e-3);
  }
}

// The composed CUDA paths: conv_transpose2d through fold (col2im), average/adaptive pooling
// and upsampling through separable products (Note [Separable resampling]), values and
// gradients against the CPU kernels.
TEST(CrossBackend, TransposedConvolutionPoolingAndUpsampling) {
  TL_REQUIRE_GPU();
  namespace F = nn::functional;
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const std::string name(dtype_name(dt));
    const double rt = dt == kFloat64 ? 1e-9 : 1e-4;
    Tensor x = values({2, 4, 7, 6}, dt, false, 25), w = values({4, 3, 3, 2}, dt, false, 26);
    Tensor b = values({6}, dt, false, 27);
    const std::vector<
        std::pair<std::string, std::function<Tensor(const Tensor&, const std::vector<Tensor>&)>>>
        ops = {
            {"conv_transpose2d groups stride padding output_padding dilation",
             [](const Tensor& in, const std::vector<Tensor>& v) {
               return F::conv_transpose2d(in, v[1], v[2], {2, 3}, {1, 0}, {1, 2}, 2, {1, 2});
             }},
            {"conv_transpose2d plain",
             [](const Tensor& in, const std::vector<Tensor>& v) {
               return F::conv_transpose2d(in, v[1]);
             }},
            {"avg_pool2d pad ceil count_include_pad",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::avg_pool2d(in, {3, 2}, nn::IntPair{2, 2}, {1, 1}, true, true);
             }},
            {"avg_pool2d exclude pad",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::avg_pool2d(in, 3, nn::IntPair{2, 1}, 1, true, false);
             }},
            {"avg_pool2d divisor_override",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::avg_pool2d(in, 2, std::nullopt, 0, false, true, 3);
             }},
            {"adaptive_avg_pool2d",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::adaptive_avg_pool2d(in, {3, 4}) +
                      F::adaptive_avg_pool2d(in, {9, 1}).mean();
             }},
            {"nearest",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::interpolate(in, nn::IntPair{11, 13}, std::nullopt, "nearest");
             }},
            {"nearest scale 2",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::interpolate(in, std::nullopt, nn::DoublePair{2.0, 2.0}, "nearest");
             }},
            {"bilinear",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::interpolate(in, std::nullopt, nn::DoublePair{1.7, 0.6}, "bilinear", false);
             }},
            {"bilinear align_corners",
             [](const Tensor& in, const std::vector<Tensor>&) {
               return F::interpolate(in, nn::IntPair{10, 5}, std::nullopt, "bilinear", true);
             }},
        };
    for (const auto& [what, op] : ops) {
      check(
          what + " " + name, {x, w, b}, identity,
          [&op](auto& v) { return op(v[0].transpose(2, 3), v); }, rt, 1e-4);  // strided input
      check(
          what + " gradients " + name, {x, w, b}, identity,
          [&op](auto& v) {
            Tensor xi = v[0].clone().requires_grad_(true);
            Tensor y = op(xi, v);
            (y * y).sum().backward();
            return xi.grad();
          },
          rt, 1e-3);
    }
    check(
        "conv_transpose2d weight and bias gradients " + name, {x, w, b}, identity,
        [](auto& v) {
          Tensor wi = v[1].clone().requires_grad_(true), bi = v[2].clone().requires_grad_(true);
          Tensor y = F::conv_transpose2d(v[0], wi, bi, 2, 1, 1, 2);
          (y * y).sum().backward();
          return tl::cat({wi.grad().reshape({-1}), bi.grad()});
        },
        rt, 1e-3);
  }
}

// Note [Chunked convolution columns]: a batch whose columns exceed the 32 MiB budget runs in
// chunks, and only the input and the weight stay alive for backward.
TEST(CrossBackend, ConvolutionColumnsInChunks) {
  TL_REQUIRE_GPU();
  Tensor x = values({64, 16, 32, 32}, kFloat32, false, 41),
         w = values({8, 16, 3, 3}, kFloat32, false, 42);
  check(
      "conv2d in chunks with gradients", {x, w}, identity,
      [](auto& v) {
        Tensor xi = v[0].clone().requires_grad_(true), wi = v[1].clone().requires_grad_(true);
        Tensor y = nn::functional::conv2d(xi, wi, {}, 1, 1);
        (y * y).sum().backward();
        return tl::cat({y.reshape({-1}), xi.grad().reshape({-1}), wi.grad().reshape({-1})});
      },
      1e-4, 1e-3);
  Tensor xg = x.to(kGpu).requires_grad_(true), wg = w.to(kGpu).requires_grad_(true);
  synchronize(kGpu);
  const int64_t before = memory_allocated(kGpu);
  Tensor y = nn::functional::conv2d(xg, wg, {}, 1, 1);
  const int64_t held = memory_allocated(kGpu) - before;
  // The output only (64*8*32*32 floats = 2 MiB); the columns would be 36 MiB.
  EXPECT_LE(held, y.numel() * 4 + (int64_t{1} << 20)) << held;

  // conv_transpose2d, 8 -> 16 channels: 16*9 column rows at 1024 positions per image, 36 MiB
  // for the 64 images, so it runs in chunks too.
  Tensor xt = values({64, 8, 32, 32}, kFloat32, false, 43),
         wt = values({8, 16, 3, 3}, kFloat32, false, 44);
  check(
      "conv_transpose2d in chunks with gradients", {xt, wt}, identity,
      [](auto& v) {
        Tensor xi = v[0].clone().requires_grad_(true), wi = v[1].clone().requires_grad_(true);
        Tensor yt = nn::functional::conv_transpose2d(xi, wi, {}, 1, 1);
        (yt * yt).sum().backward();
        return tl::cat({yt.reshape({-1}), xi.grad().reshape({-1}), wi.grad().reshape({-1})});
      },
      1e-4, 1e-3);
  Tensor xtg = xt.to(kGpu).requires_grad_(true), wtg = wt.to(kGpu).requires_grad_(true);
  synchronize(kGpu);
  const int64_t before_t = memory_allocated(kGpu);
  Tensor yt = nn::functional::conv_transpose2d(xtg, wtg, {}, 1, 1);
  const int64_t held_t = memory_allocated(kGpu) - before_t;
  EXPECT_LE(held_t, yt.numel() * 4 + (int64_t{1} << 20)) << held_t;
}

TEST(CrossBackend, DevicesMustAgree) {
  TL_REQUIRE_GPU();
  Tensor g = ones({3}, TensorOptions().device(kGpu)), c = ones({3});
  try {
    (void)(g + c);
    FAIL() << "expected tl::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Expected all tensors to be on the same device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)g.mm(c.view({3, 1})), Error);
  EXPECT_TRUE((g + full({}, 2.0)).is_cuda());  // a 0-dim CPU tensor is a number
}

TEST(CrossBackend, SixtyFourBitIndexing) {
  TL_REQUIRE_GPU();
  // 2^31 + 7 elements: past the 32-bit fast path of the offset calculator.
  const int64_t n = (int64_t{1} << 31) + 7;
  Tensor t = zeros({n}, TensorOptions(kUInt8).device(kGpu));
  t.slice(0, n - 3).fill_(2);
  Tensor u = t + 1;  // 64-bit elementwise
  EXPECT_EQ(u.sum().item<int64_t>(), n + 3 * 2);
  EXPECT_EQ(u.slice(0, n - 1).cpu().item<int>(), 3);
}

}  // namespace
}  // namespace tl
