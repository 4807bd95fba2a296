// tl::nn pooling and upsampling (tensorlib/nn/pooling.cpp, upsample.cpp): forward values and
// max indices against PyTorch (tests/tensorlib/data/pooling_reference.py), gradients against
// finite differences, modules, errors, and a small CNN that learns.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tensorlib/nn/conv.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/pooling.h>
#include <tensorlib/nn/upsample.h>
#include <tensorlib/tensorlib.h>

#include "data/pooling_reference.h"
#include "tensorlib/expect_error.h"
#include "tensorlib/gradcheck.h"

namespace {

using tl::Tensor;
namespace F = tl::nn::functional;
using tl::nn::DoublePair;
using tl::nn::IntPair;
using tl_test::gradcheck;
using tl_test::randd;

using Op = std::function<Tensor(const Tensor&)>;

// The deterministic inputs of pooling_reference.py: element i is ((37 i + 17 seed) % 101) / 50 - 1.
Tensor pattern(const std::vector<int64_t>& shape, int64_t seed, tl::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = double((i * 37 + seed * 17) % 101) / 50.0 - 1.0;
  return tl::tensor(v, dtype).reshape(shape);
}

// The case's op on x.
std::pair<Tensor, Tensor> run_case_on(const pooling_reference::Case& c, const Tensor& x) {
  const std::string op = c.op;
  const IntPair kernel{c.kernel[0], c.kernel[1]}, stride{c.stride[0], c.stride[1]};
  const IntPair padding{c.padding[0], c.padding[1]}, dilation{c.dilation[0], c.dilation[1]};
  if (op == "max_pool2d") {
    auto [y, ix] = F::max_pool2d_with_indices(x, kernel, stride, padding, dilation, c.ceil_mode);
    return {y, ix};
  }
  if (op == "avg_pool2d") {
    std::optional<int64_t> divisor;
    if (c.divisor_override) divisor = c.divisor_override;
    return {F::avg_pool2d(x, kernel, stride, padding, c.ceil_mode, c.count_include_pad, divisor),
            {}};
  }
  if (op == "adaptive_avg_pool2d") return {F::adaptive_avg_pool2d(x, {c.size[0], c.size[1]}), {}};
  tl::nn::InterpolateOptions o;
  if (c.size[0]) o.size({c.size[0], c.size[1]});
  if (c.scale[0] > 0) o.scale_factor({c.scale[0], c.scale[1]});
  o.mode(c.mode);
  if (c.align_corners >= 0) o.align_corners(c.align_corners == 1);
  if (c.recompute_scale_factor) o.recompute_scale_factor(true);
  return {F::interpolate(x, o), {}};
}

std::pair<Tensor, Tensor> run_case(const pooling_reference::Case& c, tl::ScalarType dtype) {
  return run_case_on(c, pattern(c.input, 1, dtype));
}

// |got - want| within one unit in the last place of the 16-bit dtype (+ float32's error).
void expect_rounded_once(const Tensor& got, const Tensor& want, tl::ScalarType dt,
                         const std::string& what) {
  ASSERT_EQ(got.dtype(), dt) << what;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  const double ulp = dt == tl::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  const Tensor err = (got.to(tl::kFloat64) - want).abs();
  EXPECT_LE((err - (want.abs() * ulp + 1e-6)).max().item<double>(), 0.0)
      << what << ": max error " << err.max().item<double>();
}

TEST(Pooling, ForwardMatchesPyTorch) {
  for (const auto& c : pooling_reference::kCases) {
    SCOPED_TRACE(c.name);
    for (auto [dtype, tol] : {std::pair{tl::kFloat64, 1e-12}, std::pair{tl::kFloat32, 1e-6}}) {
      auto [y, ix] = run_case(c, dtype);
      EXPECT_EQ(y.dtype(), dtype);
      ASSERT_EQ(y.sizes().vec(), c.out_shape);
      Tensor flat = y.to(tl::kFloat64).contiguous().view({-1});
      for (size_t i = 0; i < c.out.size(); ++i)
        ASSERT_NEAR(flat[int64_t(i)].item<double>(), c.out[i], tol) << "element " << i;
      if (!c.indices.empty()) {
        ASSERT_EQ(ix.dtype(), tl::kInt64);
        Tensor iflat = ix.contiguous().view({-1});
        for (size_t i = 0; i < c.indices.size(); ++i)
          ASSERT_EQ(iflat[int64_t(i)].item<int64_t>(), c.indices[i]) << "index " << i;
      }
    }
  }
}

// float16 and bfloat16 pool and interpolate in float32 and round once (Note
// [Reduced-precision image kernels]), as PyTorch's CPU kernels: each output is the float64 op
// on the same (rounded) values, rounded; a maximum is exact and at the same index.
TEST(Pooling, HalfAndBFloat16ComputeInFloatAndRoundOnce) {
  for (tl::ScalarType dt : {tl::kFloat16, tl::kBFloat16}) {
    for (const auto& c : pooling_reference::kCases) {
      const std::string what = std::string(c.name) + " " + std::string(tl::dtype_name(dt));
      const Tensor x = pattern(c.input, 1, dt);
      auto [y, ix] = run_case_on(c, x);
      auto [y64, ix64] = run_case_on(c, x.to(tl::kFloat64));
      expect_rounded_once(y, y64, dt, what);
      if (ix64.defined()) {
        EXPECT_TRUE(tl::equal(ix, ix64)) << what;
        EXPECT_TRUE(tl::equal(y.to(tl::kFloat64), y64)) << what;
      }
    }
  }
}

TEST(Pooling, HalfAndBFloat16Gradients) {
  const std::vector<std::pair<std::string, Op>> ops = {
      {"max_pool2d", [](const Tensor& x) { return F::max_pool2d(x, 3, 2, 1); }},
      {"avg_pool2d", [](const Tensor& x) { return F::avg_pool2d(x, 3, 2, 1, true, false); }},
      {"adaptive_avg_pool2d",
       [](const Tensor& x) {
         return F::adaptive_avg_pool2d(x, {3, 2});
       }},
      {"bilinear",
       [](const Tensor& x) {
         return F::interpolate(x, tl::nn::InterpolateOptions().size({9, 7}).mode("bilinear"));
       }},
      {"nearest",
       [](const Tensor& x) {
         return F::interpolate(x, tl::nn::InterpolateOptions().scale_factor({2.0, 1.5}));
       }},
  };
  for (tl::ScalarType dt : {tl::kFloat16, tl::kBFloat16}) {
    for (const auto& [name, op] : ops) {
      const std::string what = name + " " + std::string(tl::dtype_name(dt));
      tl::manual_seed(5);
      const Tensor x0 = tl::randn({2, 3, 6, 5}).to(dt);
      Tensor x = x0.clone().requires_grad_(true), x64 = x0.to(tl::kFloat64).requires_grad_(true);
      const Tensor y = op(x), y64 = op(x64);
      const Tensor g = tl::randn(y.sizes()).to(dt);
      y.backward(g);
      y64.backward(g.to(tl::kFloat64));
      expect_rounded_once(x.grad(), x64.grad(), dt, what + " gradient");
    }
  }
}

// As PyTorch's CPU kernel: the first maximum in scan order wins a tie, NaN propagates.
TEST(Pooling, MaxPoolTiesAndNaN) {
  Tensor x = tl::zeros({1, 1, 2, 4});
  auto [y, ix] = F::max_pool2d_with_indices(x, 2);
  EXPECT_EQ(ix.view({-1})[0].item<int64_t>(), 0);
  EXPECT_EQ(ix.view({-1})[1].item<int64_t>(), 2);
  x.view({-1})[5].fill_(std::numeric_limits<double>::quiet_NaN());
  auto [y2, ix2] = F::max_pool2d_with_indices(x, 2);
  EXPECT_TRUE(std::isnan(y2.view({-1})[0].item<double>()));
  EXPECT_EQ(ix2.view({-1})[0].item<int64_t>(), 5);
  EXPECT_EQ(y2.view({-1})[1].item<double>(), 0.0);
}

void check_grad(const std::string& name, const Op& op, std::vector<int64_t> shape) {
  SCOPED_TRACE(name);
  gradcheck(name, [&](const std::vector<Tensor>& t) { return op(t[0]); }, {randd(shape)});
}

TEST(Pooling, MaxPoolGradients) {
  tl::manual_seed(11);
  check_grad("k2", [](const Tensor& x) { return F::max_pool2d(x, 2); }, {2, 2, 4, 6});
  check_grad("overlapping", [](const Tensor& x) { return F::max_pool2d(x, 3, 1); }, {1, 2, 5, 5});
  check_grad("padding_stride",
             [](const Tensor& x) {
               return F::max_pool2d(x, {3, 2}, IntPair{2, 1}, {1, 1});
             },
             {1, 2, 6, 5});
  check_grad("dilation",
             [](const Tensor& x) {
               return F::max_pool2d(x, 2, IntPair{1, 2}, 1, {2, 3});
             },
             {1, 1, 6, 7});
  check_grad("ceil_mode",
             [](const Tensor& x) {
               return F::max_pool2d(x, 3, IntPair{2, 2}, 1, 1, true);
             },
             {1, 2, 6, 8});
  check_grad("unbatched", [](const Tensor& x) { return F::max_pool2d(x, 2); }, {3, 4, 4});
}

TEST(Pooling, AvgPoolGradients) {
  tl::manual_seed(12);
  for (bool ceil : {false, true}) {
    for (bool include_pad : {false, true}) {
      const std::string name =
          std::string(ceil ? "ceil" : "floor") + (include_pad ? "_include_pad" : "_exclude_pad");
      check_grad(name,
                 [=](const Tensor& x) {
                   return F::avg_pool2d(x, {3, 2}, IntPair{2, 2}, {1, 1}, ceil, include_pad);
                 },
                 {2, 2, 7, 6});
    }
  }
  check_grad("divisor_override",
             [](const Tensor& x) {
               return F::avg_pool2d(x, 2, IntPair{1, 1}, 1, false, true, 5);
             },
             {1, 2, 4, 3});
  check_grad("unbatched", [](const Tensor& x) { return F::avg_pool2d(x, 2); }, {2, 4, 4});
}

TEST(Pooling, AdaptiveAvgPoolGradients) {
  tl::manual_seed(13);
  check_grad("down",
             [](const Tensor& x) {
               return F::adaptive_avg_pool2d(x, {3, 2});
             },
             {2, 2, 7, 5});
  check_grad("up", [](const Tensor& x) { return F::adaptive_avg_pool2d(x, {5, 4}); }, {1, 2, 3, 3});
  check_grad("global", [](const Tensor& x) { return F::adaptive_avg_pool2d(x, 1); }, {2, 3, 4, 4});
}

TEST(Pooling, InterpolateGradients) {
  tl::manual_seed(14);
  check_grad("nearest_size",
             [](const Tensor& x) {
               return F::interpolate(x, IntPair{7, 5});
             },
             {1, 2, 4, 3});
  check_grad("nearest_scale",
             [](const Tensor& x) {
               return F::interpolate(x, std::nullopt, DoublePair{2.0, 1.5});
             },
             {1, 2, 3, 4});
  check_grad("nearest_down",
             [](const Tensor& x) {
               return F::interpolate(x, IntPair{2, 3});
             },
             {1, 1, 5, 7});
  for (bool align : {false, true}) {
    const std::string suffix = align ? "_align" : "";
    check_grad("bilinear_up" + suffix,
               [=](const Tensor& x) {
                 return F::interpolate(x, IntPair{7, 5}, {}, "bilinear", align);
               },
               {1, 2, 4, 3});
    check_grad("bilinear_down" + suffix,
               [=](const Tensor& x) {
                 return F::interpolate(x, IntPair{3, 2}, {}, "bilinear", align);
               },
               {2, 1, 6, 5});
  }
  check_grad("bilinear_scale",
             [](const Tensor& x) { return F::interpolate(x, std::nullopt, 2.5, "bilinear"); },
             {1, 1, 3, 4});
}

TEST(Pooling, ModulesHaveNoParametersAndRunTheOps) {
  auto seq = std::make_shared<tl::nn::Sequential>();
  seq->push_back(std::make_shared<tl::nn::MaxPool2d>(2));
  seq->push_back(std::make_shared<tl::nn::AvgPool2d>(3, 1, 1, false, false));
  seq->push_back(std::make_shared<tl::nn::Upsample>(
      tl::nn::UpsampleOptions().scale_factor(2).mode("bilinear").align_corners(true)));
  seq->push_back(std::make_shared<tl::nn::AdaptiveAvgPool2d>(IntPair{3, 5}));
  EXPECT_TRUE(seq->named_parameters().empty());
  auto pool = std::dynamic_pointer_cast<tl::nn::MaxPool2d>(seq->children()[0]);
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->stride, IntPair(2, 2));  // stride defaults to kernel_size
  tl::manual_seed(15);
  Tensor x = tl::randn({2, 3, 8, 10});
  Tensor want = F::max_pool2d(x, 2);
  want = F::avg_pool2d(want, 3, IntPair{1, 1}, 1, false, false);
  want = F::interpolate(want, std::nullopt, 2.0, "bilinear", true);
  want = F::adaptive_avg_pool2d(want, {3, 5});
  Tensor got = (*seq)(x);
  EXPECT_EQ(got.sizes().vec(), (std::vector<int64_t>{2, 3, 3, 5}));
  EXPECT_TRUE(tl::equal(got, want));
  tl::nn::Upsample nearest(tl::nn::UpsampleOptions().size({4, 4}));
  EXPECT_EQ(nearest.forward(tl::randn({1, 1, 2, 2})).sizes().vec(),
            (std::vector<int64_t>{1, 1, 4, 4}));
}

TEST(Pooling, NodeNamesAndSavedIndices) {
  Tensor x = tl::randn({1, 2, 4, 4}).requires_grad_();
  EXPECT_EQ(F::max_pool2d(x, 2).grad_fn()->name(), "MaxPool2DWithIndicesBackward0");
  EXPECT_EQ(F::avg_pool2d(x, 2).grad_fn()->name(), "AvgPool2DBackward0");
  EXPECT_EQ(F::adaptive_avg_pool2d(x, 1).grad_fn()->name(), "AdaptiveAvgPool2DBackward0");
  EXPECT_EQ(F::interpolate(x, IntPair{8, 8}).grad_fn()->name(), "UpsampleNearest2DBackward0");
  EXPECT_EQ(F::interpolate(x, IntPair{8, 8}, {}, "bilinear").grad_fn()->name(),
            "UpsampleBilinear2DBackward0");
}

TEST(Pooling, ErrorsNameTheArgument) {
  Tensor x = tl::randn({1, 2, 5, 5});
  EXPECT_ERROR(F::max_pool2d(tl::randn({5, 5}), 2),
               "max_pool2d: expected a 3-D (unbatched [C, H, W]) or 4-D");
  EXPECT_ERROR(F::max_pool2d(x, 0), "max_pool2d: kernel_size must be positive, got [0, 0]");
  EXPECT_ERROR(F::max_pool2d(x, 2, IntPair{0, 1}), "max_pool2d: stride must be positive");
  EXPECT_ERROR(F::max_pool2d(x, 2, std::nullopt, 2),
               "max_pool2d: padding [2, 2] should be at most half of the effective kernel size");
  EXPECT_ERROR(F::max_pool2d(x, 6),
               "max_pool2d: input of shape [1, 2, 5, 5] gives an output of 0 x 0");
  EXPECT_ERROR(F::max_pool2d(x.to(tl::kInt64), 2),
               "max_pool2d: expected a floating-point input (float32, float64, float16 or "
               "bfloat16), got int64");
  EXPECT_ERROR(F::avg_pool2d(x, 3, std::nullopt, 2),
               "avg_pool2d: padding [2, 2] should be at most half of kernel_size [3, 3]");
  EXPECT_ERROR(F::avg_pool2d(x, 2, std::nullopt, 0, false, true, 0),
               "avg_pool2d: divisor_override must be non-zero");
  EXPECT_ERROR(F::adaptive_avg_pool2d(x, {0, 2}),
               "adaptive_avg_pool2d: output_size must be positive");
  EXPECT_ERROR(F::interpolate(x, std::nullopt), "interpolate: either size or scale_factor");
  EXPECT_ERROR(F::interpolate(x, IntPair{3, 3}, 2.0),
               "interpolate: only one of size or scale_factor");
  EXPECT_ERROR(F::interpolate(x, IntPair{3, 3}, {}, "bicubic"),
               "interpolate: mode must be \"nearest\" or \"bilinear\", got \"bicubic\"");
  EXPECT_ERROR(F::interpolate(x, IntPair{3, 3}, {}, "nearest", true),
               "interpolate: align_corners can only be set with the interpolating mode");
  EXPECT_ERROR(F::interpolate(tl::randn({2, 5, 5}), IntPair{3, 3}),
               "interpolate: expected a 4-D input [N, C, H, W]");
  EXPECT_ERROR(F::interpolate(x, std::nullopt, 0.1), "sizes should be greater than 0");
  EXPECT_ERROR(tl::nn::Upsample(tl::nn::UpsampleOptions()), "Upsample: exactly one of size");
}

// The Fashion-MNIST CNN's layers, end to end: a few SGD steps on one fixed batch drive the loss
// down, so forward and backward of every layer fit together.
TEST(Pooling, SmallCnnLearnsOneBatch) {
  tl::manual_seed(16);
  namespace nn = tl::nn;
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 8, 3).padding(1)));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::MaxPool2d>(2));
  model->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(8, 16, 3).padding(1)));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::MaxPool2d>(2));
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(16 * 7 * 7, 10));
  Tensor x = tl::randn({16, 1, 28, 28});
  Tensor y = tl::randint(0, 10, {16});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    model->zero_grad();
    Tensor loss = F::cross_entropy((*model)(x), y);
    loss.backward();
    (step == 0 ? first : last) = loss.item<double>();
    tl::NoGradGuard no_grad;
    for (Tensor& p : model->parameters()) p.sub_(p.grad() * 0.05);
  }
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
}

}  // namespace
