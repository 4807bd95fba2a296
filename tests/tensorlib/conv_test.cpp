// tl::nn conv2d / conv_transpose2d (tensorlib/nn/conv.cpp): forward values against PyTorch
// (tests/tensorlib/data/conv_reference.py), gradients against finite differences, batch
// chunking against a direct loop, modules' parameters and initialisation, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <tensorlib/nn/conv.h>
#include <tensorlib/tensorlib.h>

#include "data/conv_reference.h"
#include "tensorlib/expect_error.h"
#include "tensorlib/gradcheck.h"

namespace {

using tl::Tensor;
namespace F = tl::nn::functional;
using tl::nn::IntPair;
using tl_test::gradcheck;
using tl_test::randd;

// The deterministic inputs of conv_reference.py: element i is ((37 i + 17 seed) % 101) / 50 - 1.
Tensor pattern(const std::vector<int64_t>& shape, int64_t seed, tl::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = double((i * 37 + seed * 17) % 101) / 50.0 - 1.0;
  return tl::tensor(v, dtype).reshape(shape);
}

void expect_values(const Tensor& got, const std::vector<double>& want, double tol,
                   const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  Tensor flat = got.to(tl::kFloat64).contiguous().view({-1});
  const double* p = flat.data_ptr<double>();
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(p[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " element " << i;
}

// The case's inputs in `dtype`.
std::vector<Tensor> case_inputs(const conv_reference::Case& c, tl::ScalarType dtype) {
  const int64_t out_channels = c.transposed ? c.weight[1] * c.groups : c.weight[0];
  return {pattern(c.input, 1, dtype), pattern(c.weight, 2, dtype),
          c.bias ? pattern({out_channels}, 3, dtype) : Tensor()};
}

// The case's op on x, w, b.
Tensor run_case_on(const conv_reference::Case& c, const Tensor& x, const Tensor& w,
                   const Tensor& b) {
  IntPair stride{c.stride[0], c.stride[1]}, padding{c.padding[0], c.padding[1]};
  IntPair dilation{c.dilation[0], c.dilation[1]};
  if (c.transposed)
    return F::conv_transpose2d(x, w, b, stride, padding, {c.output_padding[0], c.output_padding[1]},
                               c.groups, dilation);
  return F::conv2d(x, w, b, stride, padding, dilation, c.groups);
}

Tensor run_case(const conv_reference::Case& c, tl::ScalarType dtype) {
  const std::vector<Tensor> in = case_inputs(c, dtype);
  return run_case_on(c, in[0], in[1], in[2]);
}

// The 16-bit floats' relative rounding bound with float accumulation on top: one unit in the
// last place (half of it is the rounding itself).
double ulp_bound(tl::ScalarType dt) {
  return dt == tl::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
}

Tensor as_f64(const Tensor& t) {
  return t.defined() ? t.to(tl::kFloat64) : t;
}

// |got - want| within the dtype's rounding of want (+ float32 accumulation's error).
void expect_rounded_once(const Tensor& got, const Tensor& want, tl::ScalarType dt,
                         const std::string& what) {
  ASSERT_EQ(got.dtype(), dt) << what;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  const Tensor err = (got.to(tl::kFloat64) - want).abs();
  const Tensor bound = want.abs() * ulp_bound(dt) + 1e-5;
  EXPECT_LE((err - bound).max().item<double>(), 0.0)
      << what << ": max error " << err.max().item<double>() << ", max |want| "
      << want.abs().max().item<double>();
}

TEST(Conv, ForwardMatchesPyTorch) {
  for (const auto& c : conv_reference::kCases) {
    SCOPED_TRACE(c.name);
    Tensor y64 = run_case(c, tl::kFloat64);
    EXPECT_EQ(y64.sizes().vec(), c.out_shape);
    expect_values(y64, c.out, 1e-12, std::string(c.name) + " float64");
    Tensor y32 = run_case(c, tl::kFloat32);
    EXPECT_EQ(y32.dtype(), tl::kFloat32);
    expect_values(y32, c.out, 1e-5, std::string(c.name) + " float32");
  }
}

// float16 and bfloat16 convolutions on the CPU compute in float32 and round once (Note
// [Reduced-precision image kernels]), as PyTorch's CPU kernels do: every output is the float64
// convolution of the same (rounded) values, rounded to the dtype. The float64 path is the one
// checked against PyTorch above.
TEST(Conv, HalfAndBFloat16ComputeInFloatAndRoundOnce) {
  for (tl::ScalarType dt : {tl::kFloat16, tl::kBFloat16}) {
    for (const auto& c : conv_reference::kCases) {
      const std::string what = std::string(c.name) + " " + std::string(tl::dtype_name(dt));
      const std::vector<Tensor> in = case_inputs(c, dt);
      expect_rounded_once(run_case_on(c, in[0], in[1], in[2]),
                          run_case_on(c, as_f64(in[0]), as_f64(in[1]), as_f64(in[2])), dt, what);
    }
  }
}

// Their gradients likewise, in the parameters' dtype (what an optimizer steps).
TEST(Conv, HalfAndBFloat16Gradients) {
  for (tl::ScalarType dt : {tl::kFloat16, tl::kBFloat16}) {
    for (bool transposed : {false, true}) {
      const std::string what = std::string(transposed ? "conv_transpose2d " : "conv2d ") +
                               std::string(tl::dtype_name(dt));
      tl::manual_seed(11);
      const Tensor x = tl::randn({2, 4, 6, 5}).to(dt), w = tl::randn({4, 2, 3, 3}).to(dt);
      const Tensor b = tl::randn({4}).to(dt);  // 4 output channels either way
      auto op = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
        return transposed ? F::conv_transpose2d(xi, wi, bi, 2, 1, 1, 2)
                          : F::conv2d(xi, wi, bi, {2, 1}, 1, 1, 2);
      };
      std::vector<Tensor> low = {x.clone().requires_grad_(true), w.clone().requires_grad_(true),
                                 b.clone().requires_grad_(true)};
      std::vector<Tensor> ref = {as_f64(x).requires_grad_(true), as_f64(w).requires_grad_(true),
                                 as_f64(b).requires_grad_(true)};
      const Tensor y = op(low[0], low[1], low[2]), y64 = op(ref[0], ref[1], ref[2]);
      const Tensor g = tl::randn(y.sizes()).to(dt);
      y.backward(g);
      y64.backward(as_f64(g));
      for (int i = 0; i < 3; ++i)
        expect_rounded_once(low[i].grad(), ref[i].grad(), dt,
                            what + " gradient of input " + std::to_string(i));
    }
  }
}

// A plain six-loop convolution, independent of im2col (for shapes too big to embed).
Tensor direct_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntPair st, IntPair pad,
                     IntPair dil, int64_t groups) {
  const int64_t n = x.size(0), ci = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t co = w.size(0), kh = w.size(2), kw = w.size(3), cig = ci / groups;
  const int64_t oh = (h + 2 * pad.h - dil.h * (kh - 1) - 1) / st.h + 1;
  const int64_t ow = (wd + 2 * pad.w - dil.w * (kw - 1) - 1) / st.w + 1;
  Tensor xc = x.to(tl::kFloat64).contiguous(), wc = w.to(tl::kFloat64).contiguous();
  Tensor out = tl::zeros({n, co, oh, ow}, tl::kFloat64);
  const double *xp = xc.data_ptr<double>(), *wp = wc.data_ptr<double>();
  double* op = out.data_ptr<double>();
  for (int64_t in = 0; in < n; ++in)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = b.defined() ? b[o].item<double>() : 0.0;
          const int64_t grp = o / (co / groups);
          for (int64_t c = 0; c < cig; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = y * st.h - pad.h + i * dil.h, ix = xo * st.w - pad.w + j * dil.w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += xp[((in * ci + grp * cig + c) * h + iy) * wd + ix] *
                       wp[((o * cig + c) * kh + i) * kw + j];
              }
          op[((in * co + o) * oh + y) * ow + xo] = acc;
        }
  return out;
}

// Large images exceed the 32 MiB column budget, so the batch runs in chunks of images (here
// 4 + 1: both the folded product and the one-image path) with the same results.
TEST(Conv, ChunkedBatchMatchesDirectLoop) {
  tl::manual_seed(1);
  Tensor x = tl::randn({5, 2, 300, 300});
  Tensor w = tl::randn({3, 2, 3, 3}), b = tl::randn({3});
  Tensor y = F::conv2d(x, w, b, 1, 1);
  Tensor ref = direct_conv2d(x, w, b, 1, 1, 1, 1);
  EXPECT_TRUE(tl::allclose(y.to(tl::kFloat64), ref, 1e-4, 1e-4));

  // Gradients of the chunked batch equal the sums of per-image gradients.
  Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_();
  Tensor bg = b.clone().requires_grad_();
  Tensor gy = tl::randn(y.sizes());
  (F::conv2d(xg, wg, bg, 1, 1) * gy).sum().backward();
  Tensor gw_sum = tl::zeros_like(w), gb_sum = tl::zeros_like(b);
  for (int64_t i = 0; i < 5; ++i) {
    Tensor xi = x[i].unsqueeze(0).clone().requires_grad_(), wi = w.clone().requires_grad_();
    Tensor bi = b.clone().requires_grad_();
    (F::conv2d(xi, wi, bi, 1, 1) * gy[i].unsqueeze(0)).sum().backward();
    EXPECT_TRUE(tl::allclose(xg.grad()[i], xi.grad()[0], 1e-4, 1e-4)) << "image " << i;
    gw_sum += wi.grad();
    gb_sum += bi.grad();
  }
  EXPECT_TRUE(tl::allclose(wg.grad(), gw_sum, 1e-3, 1e-2));
  EXPECT_TRUE(tl::allclose(bg.grad(), gb_sum, 1e-3, 1e-2));
}

TEST(Conv, Conv2dGradients) {
  tl::manual_seed(2);
  struct Config {
    const char* name;
    std::vector<int64_t> x, w;
    bool bias;
    IntPair stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Config> configs = {
      {"plain", {2, 2, 5, 4}, {3, 2, 3, 2}, true, 1, 0, 1, 1},
      {"stride_padding", {2, 2, 6, 5}, {2, 2, 3, 3}, true, {2, 1}, {1, 2}, 1, 1},
      {"dilation", {1, 2, 7, 6}, {2, 2, 2, 3}, false, 1, {0, 1}, {3, 2}, 1},
      {"groups", {2, 4, 5, 5}, {4, 2, 3, 3}, true, 2, 1, 1, 2},
      {"depthwise", {1, 3, 4, 4}, {6, 1, 2, 2}, true, 1, 1, {1, 2}, 3},
      {"unbatched", {2, 4, 5}, {3, 2, 2, 2}, true, {1, 2}, 1, 1, 1},
  };
  for (const Config& c : configs) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in = {randd(c.x), randd(c.w)};
    if (c.bias) in.push_back(randd({c.w[0]}));
    gradcheck(
        c.name,
        [&](const std::vector<Tensor>& t) {
          return F::conv2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.padding, c.dilation,
                           c.groups);
        },
        in);
  }
}

TEST(Conv, ConvTranspose2dGradients) {
  tl::manual_seed(3);
  struct Config {
    const char* name;
    std::vector<int64_t> x, w;
    bool bias;
    IntPair stride, padding, output_padding;
    int64_t groups;
    IntPair dilation;
  };
  const std::vector<Config> configs = {
      {"plain", {2, 2, 3, 4}, {2, 3, 3, 2}, true, 1, 0, 0, 1, 1},
      {"stride_output_padding", {2, 2, 3, 3}, {2, 2, 3, 3}, true, {2, 3}, {1, 0}, {1, 2}, 1, 1},
      {"groups_dilation", {1, 4, 3, 3}, {4, 1, 2, 2}, false, 2, {0, 1}, {1, 0}, 2, {2, 1}},
      {"unbatched", {2, 3, 3}, {2, 2, 2, 2}, true, 2, 1, 1, 1, 1},
  };
  for (const Config& c : configs) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in = {randd(c.x), randd(c.w)};
    if (c.bias) in.push_back(randd({c.w[1] * c.groups}));
    gradcheck(
        c.name,
        [&](const std::vector<Tensor>& t) {
          return F::conv_transpose2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.padding,
                                     c.output_padding, c.groups, c.dilation);
        },
        in);
  }
}

// conv_transpose2d is the adjoint of conv2d: <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>.
TEST(Conv, TransposeIsTheAdjointOfConv) {
  tl::manual_seed(4);
  Tensor x = randd({2, 4, 9, 8}), w = randd({6, 2, 3, 2});
  Tensor y = F::conv2d(x, w, {}, {2, 3}, {1, 2}, {2, 1}, 2);
  Tensor r = randd(y.sizes().vec());
  // The output size of the transposed op is ambiguous for stride > 1: output_padding picks it.
  const int64_t op_h = (9 + 2 - 2 * 2 - 1) % 2, op_w = (8 + 4 - 1 * 1 - 1) % 3;
  Tensor xt = F::conv_transpose2d(r, w, {}, {2, 3}, {1, 2}, {op_h, op_w}, 2, {2, 1});
  ASSERT_EQ(xt.sizes(), x.sizes());
  EXPECT_NEAR((y * r).sum().item<double>(), (x * xt).sum().item<double>(), 1e-9);
}

TEST(Conv, OnlyRequestedGradientsAndNodeName) {
  Tensor x = tl::randn({2, 3, 5, 5});  // a data batch: no gradient wanted
  Tensor w = tl::randn({4, 3, 3, 3}).requires_grad_();
  Tensor y = F::conv2d(x, w);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "ConvolutionBackward0");
  y.sum().backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(w.grad().sizes(), w.sizes());
  tl::NoGradGuard no_grad;
  EXPECT_FALSE(F::conv2d(x, w).requires_grad());
}

TEST(Conv, DoubleBackwardIsRefused) {
  Tensor x = tl::randn({1, 1, 4, 4}, tl::kFloat64).requires_grad_();
  Tensor w = tl::randn({1, 1, 2, 2}, tl::kFloat64).requires_grad_();
  Tensor y = F::conv2d(x, w).sum();
  try {
    tl::autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
    FAIL() << "expected an error";
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d: double backward"), std::string::npos) << e.what();
  }
}

// Module::to() registers new tensors; the modules' weight and bias handles follow them
// (Note [Parameter handles]), so forward uses what parameters() and the optimizer see.
TEST(Conv, ModulesFollowTo) {
  tl::manual_seed(6);
  tl::nn::Conv2d conv(2, 3, 3, 1, 1);
  tl::nn::ConvTranspose2d deconv(3, 2, 2, 2);
  conv.to(tl::kFloat64);
  deconv.to(tl::kFloat64);
  EXPECT_EQ(conv.weight.dtype(), tl::kFloat64);
  EXPECT_TRUE(conv.weight.is_same(conv.parameters()[0]));
  EXPECT_TRUE(conv.bias.is_same(conv.parameters()[1]));
  EXPECT_TRUE(deconv.weight.is_same(deconv.parameters()[0]));
  EXPECT_TRUE(conv.weight.is_leaf() && conv.weight.requires_grad());
  tl::Tensor y = deconv(conv(tl::randn({1, 2, 4, 4}, tl::kFloat64)));
  EXPECT_EQ(y.dtype(), tl::kFloat64);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 2, 8, 8}));
  y.sum().backward();
  EXPECT_TRUE(conv.weight.grad().defined());
  tl::nn::Conv2d no_bias(2, 3, 3, 1, 0, 1, 1, /*bias=*/false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.parameters().size(), 1u);
}

TEST(Conv, Conv2dModule) {
  tl::manual_seed(5);
  auto conv = std::make_shared<tl::nn::Conv2d>(
      tl::nn::Conv2dOptions(4, 6, {3, 2}).stride(2).padding(1).groups(2));
  std::vector<std::string> names;
  for (auto& [n, p] : conv->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv->weight.sizes().vec(), (std::vector<int64_t>{6, 2, 3, 2}));
  EXPECT_EQ(conv->bias.sizes().vec(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(conv->weight.requires_grad());
  // fan_in = in / groups * kH * kW = 2 * 3 * 2 = 12.
  const double bound = 1 / std::sqrt(12.0);
  EXPECT_LE(conv->weight.abs().max().item<double>(), bound);
  EXPECT_GT(conv->weight.abs().max().item<double>(), 0.8 * bound);
  EXPECT_LE(conv->bias.abs().max().item<double>(), bound);
  Tensor y = (*conv)(tl::randn({3, 4, 8, 7}));
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{3, 6, 4, 4}));

  auto no_bias = std::make_shared<tl::nn::Conv2d>(1, 32, 3, 1, 1, 1, 1, /*bias=*/false);
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(no_bias->named_parameters().size(), 1u);
  const double bound9 = 1 / 3.0;  // fan_in = 1 * 3 * 3
  EXPECT_LE(no_bias->weight.abs().max().item<double>(), bound9);
  EXPECT_GT(no_bias->weight.abs().max().item<double>(), 0.8 * bound9);
  EXPECT_EQ((*no_bias)(tl::randn({2, 1, 28, 28})).sizes().vec(),
            (std::vector<int64_t>{2, 32, 28, 28}));
}

TEST(Conv, ConvTranspose2dModule) {
  tl::manual_seed(6);
  tl::nn::ConvTranspose2d up(8, 4, 4, /*stride=*/2, /*padding=*/1);
  EXPECT_EQ(up.weight.sizes().vec(), (std::vector<int64_t>{8, 4, 4, 4}));
  EXPECT_EQ(up.bias.sizes().vec(), (std::vector<int64_t>{4}));
  // PyTorch computes fan_in from the weight's dim 1: out / groups * kH * kW = 4 * 16 = 64.
  EXPECT_LE(up.weight.abs().max().item<double>(), 0.125);
  EXPECT_GT(up.weight.abs().max().item<double>(), 0.1);
  EXPECT_LE(up.bias.abs().max().item<double>(), 0.125);
  EXPECT_EQ(up(tl::randn({2, 8, 7, 5})).sizes().vec(), (std::vector<int64_t>{2, 4, 14, 10}));
  tl::nn::ConvTranspose2d grouped(tl::nn::ConvTranspose2dOptions(4, 6, 3).groups(2).bias(false));
  EXPECT_EQ(grouped.weight.sizes().vec(), (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_FALSE(grouped.bias.defined());
}

TEST(Conv, ErrorsNameTheArgument) {
  Tensor x = tl::randn({2, 3, 8, 8}), w = tl::randn({4, 3, 3, 3});
  EXPECT_ERROR(F::conv2d(tl::randn({3, 8}), w), "conv2d: expected a 3-D (unbatched");
  EXPECT_ERROR(F::conv2d(x, tl::randn({4, 3, 3})),
               "conv2d: expected weight of shape [out_channels, in_channels / groups, kH, kW], "
               "got a 3-D tensor of shape [4, 3, 3]");
  EXPECT_ERROR(F::conv2d(x, tl::randn({4, 2, 3, 3})),
               "to have 2 channels, but got 3 channels instead");
  EXPECT_ERROR(F::conv2d(x, w, tl::randn({3})), "conv2d: expected bias of shape [4]");
  EXPECT_ERROR(F::conv2d(x, w, {}, 0), "conv2d: stride must be positive, got [0, 0]");
  EXPECT_ERROR(F::conv2d(x, w, {}, 1, -1), "conv2d: padding must be non-negative");
  EXPECT_ERROR(F::conv2d(x, w, {}, 1, 0, {1, 0}), "conv2d: dilation must be positive");
  EXPECT_ERROR(F::conv2d(x, tl::randn({4, 1, 3, 3}), {}, 1, 0, 1, 3),
               "conv2d: expected out_channels (weight.size(0) = 4) divisible by groups = 3");
  EXPECT_ERROR(F::conv2d(tl::randn({1, 3, 2, 2}), w), "conv2d: kernel size (3 x 3)");
  EXPECT_ERROR(F::conv2d(x, w.to(tl::kFloat64)), "conv2d: expected weight with the input's dtype");
  EXPECT_ERROR(F::conv2d(x.to(tl::kInt64), w),
               "conv2d: expected a floating-point input (float32, float64, float16 or bfloat16), "
               "got int64");
  EXPECT_ERROR(F::conv_transpose2d(x, tl::randn({4, 2, 3, 3})),
               "conv_transpose2d: expected input of shape [2, 3, 8, 8] to have weight.size(0) = 4");
  EXPECT_ERROR(F::conv_transpose2d(x, tl::randn({3, 2, 3, 3}), {}, 2, 0, 2),
               "conv_transpose2d: output_padding [2, 2] must be non-negative and smaller than");
  EXPECT_ERROR(tl::nn::Conv2d(3, 4, 3, 1, 0, 1, 2), "Conv2d: in_channels (3) and out_channels (4)");
  EXPECT_ERROR(tl::nn::Conv2d(3, 4, 0), "Conv2d: kernel_size must be positive");
}

}  // namespace
