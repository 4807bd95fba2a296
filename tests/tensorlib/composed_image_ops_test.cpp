// The compositions the CUDA backend runs for the image ops (nn/unfold.h), checked on the CPU
// against the fused CPU kernels, values and gradients: conv2d as unfold + products,
// conv_transpose2d as products + fold, and average/adaptive pooling and upsampling as
// separable products with per-axis weights (Note [Separable resampling]). A GPU then adds only
// the im2col/col2im kernels and cuBLAS (tests/gpu/cross_backend_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <tensorlib/nn/conv.h>
#include <tensorlib/nn/pooling.h>
#include <tensorlib/nn/unfold.h>
#include <tensorlib/nn/upsample.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;
namespace F = tl::nn::functional;
namespace D = tl::nn::detail;
using Fn = std::function<Tensor(const Tensor&)>;

// `fused` and `composed` agree on x (float64, a transposed view) and in x's gradient.
void expect_same(const std::string& what, const Fn& fused, const Fn& composed, const Tensor& x0) {
  SCOPED_TRACE(what);
  Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  Tensor ya = fused(xa.transpose(2, 3)), yb = composed(xb.transpose(2, 3));
  ASSERT_EQ(ya.sizes(), yb.sizes());
  EXPECT_TRUE(tl::allclose(yb.detach(), ya.detach(), 1e-12, 1e-12))
      << "max abs difference " << (ya - yb).abs().max().item<double>();
  Tensor g = tl::randn(ya.sizes(), tl::kFloat64);
  (ya * g).sum().backward();
  (yb * g).sum().backward();
  EXPECT_TRUE(tl::allclose(xb.grad(), xa.grad(), 1e-12, 1e-12))
      << "gradient max abs difference " << (xa.grad() - xb.grad()).abs().max().item<double>();
}

Tensor input(uint64_t seed) {
  tl::manual_seed(seed);
  return tl::randn({2, 4, 7, 6}, tl::kFloat64);  // used as [2, 4, 6, 7] (transposed)
}

TEST(ComposedImageOps, ConvolutionThroughUnfoldAndFold) {
  const Tensor x = input(1);
  tl::manual_seed(2);
  const Tensor w = tl::randn({6, 2, 3, 2}, tl::kFloat64), b = tl::randn({6}, tl::kFloat64);
  // conv2d: groups 2, stride (2, 1), padding (1, 2), dilation (1, 2).
  expect_same(
      "conv2d",
      [&](const Tensor& in) {
        return F::conv2d(in, w, b, {2, 1}, {1, 2}, {1, 2}, 2);
      },
      [&](const Tensor& in) {
        const int64_t oh = (6 + 2 - 3) / 2 + 1, ow = (7 + 4 - 3) / 1 + 1;
        return D::conv2d_unfolded(in, w, b, {2, 4, 6, 7, 3, 2, 2, 1, 1, 2, 1, 2, oh, ow}, 2);
      },
      x);
  // The same in chunks of one image (Note [Chunked convolution columns]): columns recomputed in
  // backward; the weight's and the bias's gradients too.
  Tensor wa = w.clone().requires_grad_(true), wb = w.clone().requires_grad_(true);
  Tensor ba = b.clone().requires_grad_(true), bb = b.clone().requires_grad_(true);
  expect_same(
      "conv2d in chunks of one image",
      [&](const Tensor& in) {
        return F::conv2d(in, wa, ba, {2, 1}, {1, 2}, {1, 2}, 2);
      },
      [&](const Tensor& in) {
        return D::conv2d_unfolded(in, wb, bb, {2, 4, 6, 7, 3, 2, 2, 1, 1, 2, 1, 2, 3, 9}, 2,
                                  /*col_budget_bytes=*/1);
      },
      x);
  EXPECT_TRUE(tl::allclose(wb.grad(), wa.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(tl::allclose(bb.grad(), ba.grad(), 1e-12, 1e-12));
  // conv_transpose2d: weight [in 4, out/groups 3], groups 2, stride (2, 3), padding (1, 0),
  // output_padding (1, 2), dilation (1, 2).
  const Tensor wt = tl::randn({4, 3, 3, 2}, tl::kFloat64);
  expect_same(
      "conv_transpose2d",
      [&](const Tensor& in) {
        return F::conv_transpose2d(in, wt, b, {2, 3}, {1, 0}, {1, 2}, 2, {1, 2});
      },
      [&](const Tensor& in) {
        const int64_t oh = (6 - 1) * 2 - 2 + 1 * 2 + 1 + 1, ow = (7 - 1) * 3 - 0 + 2 * 1 + 2 + 1;
        return D::conv_transpose2d_folded(in, wt, b, {2, 6, oh, ow, 3, 2, 2, 3, 1, 0, 1, 2, 6, 7},
                                          2);
      },
      x);
  expect_same(
      "conv_transpose2d plain", [&](const Tensor& in) { return F::conv_transpose2d(in, wt); },
      [&](const Tensor& in) {
        return D::conv_transpose2d_folded(in, wt, {}, {2, 3, 8, 8, 3, 2, 1, 1, 0, 0, 1, 1, 6, 7},
                                          1);
      },
      x);
  // conv_transpose2d in chunks of one image, with the weight's and the bias's gradients.
  Tensor ta = wt.clone().requires_grad_(true), tb = wt.clone().requires_grad_(true);
  Tensor ca = b.clone().requires_grad_(true), cb = b.clone().requires_grad_(true);
  expect_same(
      "conv_transpose2d in chunks of one image",
      [&](const Tensor& in) {
        return F::conv_transpose2d(in, ta, ca, {2, 3}, {1, 0}, {1, 2}, 2, {1, 2});
      },
      [&](const Tensor& in) {
        const int64_t oh = (6 - 1) * 2 - 2 + 1 * 2 + 1 + 1, ow = (7 - 1) * 3 - 0 + 2 * 1 + 2 + 1;
        return D::conv_transpose2d_folded(in, tb, cb, {2, 6, oh, ow, 3, 2, 2, 3, 1, 0, 1, 2, 6, 7},
                                          2, /*col_budget_bytes=*/1);
      },
      x);
  EXPECT_TRUE(tl::allclose(tb.grad(), ta.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(tl::allclose(cb.grad(), ca.grad(), 1e-12, 1e-12));
}

// An empty batch: empty outputs, zero weight and bias gradients (as the fused kernels give).
TEST(ComposedImageOps, EmptyBatchesGiveZeroGradients) {
  tl::manual_seed(6);
  const Tensor x = tl::randn({0, 4, 6, 7}, tl::kFloat64).requires_grad_(true);
  const Tensor w = tl::randn({4, 3, 3, 2}, tl::kFloat64).requires_grad_(true);
  const Tensor b = tl::randn({3}, tl::kFloat64).requires_grad_(true);
  Tensor y = D::conv_transpose2d_folded(x, w, b, {0, 3, 8, 8, 3, 2, 1, 1, 0, 0, 1, 1, 6, 7}, 1);
  EXPECT_EQ(y.sizes(), (tl::IntArrayRef{0, 3, 8, 8}));
  y.sum().backward();
  EXPECT_EQ(w.grad().abs().sum().item<double>(), 0.0);
  EXPECT_EQ(b.grad().abs().sum().item<double>(), 0.0);
  const Tensor wc = tl::randn({6, 4, 3, 2}, tl::kFloat64).requires_grad_(true);
  Tensor yc = D::conv2d_unfolded(x, wc, {}, {0, 4, 6, 7, 3, 2, 1, 1, 0, 0, 1, 1, 4, 6}, 1);
  EXPECT_EQ(yc.sizes(), (tl::IntArrayRef{0, 6, 4, 6}));
  yc.sum().backward();
  EXPECT_EQ(wc.grad().abs().sum().item<double>(), 0.0);
}

// Note [Chunked convolution columns]: within the column budget, a convolution's forward and
// backward hold one chunk's columns at a time, and only the input and the weight stay alive
// between them (measured with the host allocator's statistics, as a GPU run measures
// cudaMalloc'd blocks).
TEST(ComposedImageOps, ConvolutionColumnsStayWithinTheBudget) {
  tl::manual_seed(5);
  // 16 images of 8 channels at 16x16, 3x3 windows: 8*9*256 doubles = 144 KiB of columns per image
  // (2.25 MiB for the batch); a 320 KiB budget gives chunks of two images.
  constexpr int64_t kBudget = 320 << 10, kPerImage = 8 * 9 * 256 * 8, kBatch = 16 * kPerImage;
  const Tensor x0 = tl::randn({16, 8, 16, 16}, tl::kFloat64);
  const Tensor w = tl::randn({8, 8, 3, 3}, tl::kFloat64);
  const tl::detail::Window2d win{16, 8, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, 16};
  struct Op {
    std::string what;
    std::function<Tensor(const Tensor&, const Tensor&, int64_t)> run;
  };
  const std::vector<Op> ops = {
      {"conv2d", [&](const Tensor& x, const Tensor& wi,
                     int64_t budget) { return D::conv2d_unfolded(x, wi, {}, win, 1, budget); }},
      {"conv_transpose2d", [&](const Tensor& x, const Tensor& wi, int64_t budget) {
         return D::conv_transpose2d_folded(x, wi, {}, win, 1, budget);
       }}};
  for (const Op& op : ops) {
    SCOPED_TRACE(op.what);
    for (const int64_t budget : {kBudget, int64_t{64} << 20}) {
      Tensor x = x0.clone().requires_grad_(true), wi = w.clone().requires_grad_(true);
      const Tensor g = tl::randn({16, 8, 16, 16}, tl::kFloat64);
      const int64_t base = tl::memory_allocated();
      tl::reset_peak_memory_stats();
      Tensor y = op.run(x, wi, budget);
      const int64_t between = tl::memory_allocated() - base;
      (y * g).sum().backward();
      const int64_t peak = tl::max_memory_allocated() - base;
      // Between forward and backward: the output alone (its 256 KiB), nothing of the columns.
      EXPECT_EQ(between, y.nbytes()) << "budget " << budget;
      if (budget == kBudget) {
        // The output, y * g, the gradients and two images' columns plus their products: far
        // below the batch's 2.25 MiB of columns.
        EXPECT_LT(peak, kBatch) << "budget " << budget;
      } else {
        EXPECT_GT(peak, kBatch) << "one chunk of the whole batch holds its columns";
      }
    }
  }
}

// Output sizes come from the fused op; the weights from nn/unfold.h's axis builders.
Fn separable(const Fn& fused, const std::function<D::AxisWeights(int64_t, int64_t)>& rows,
             const std::function<D::AxisWeights(int64_t, int64_t)>& cols) {
  return [=](const Tensor& in) {
    const Tensor shape = fused(in.detach());
    return D::resample2d(in, rows(shape.size(2), in.size(2)), cols(shape.size(3), in.size(3)));
  };
}

TEST(ComposedImageOps, AveragePoolingIsSeparable) {
  const Tensor x = input(3);
  struct Case {
    std::string what;
    tl::nn::IntPair k, s, p;
    bool ceil, include_pad;
    std::optional<int64_t> divisor;
  };
  const std::vector<Case> cases = {
      {"plain 2x2", 2, 2, 0, false, true, std::nullopt},
      {"pad ceil include_pad", {3, 2}, {2, 2}, {1, 1}, true, true, std::nullopt},
      {"pad ceil exclude_pad", 3, {2, 1}, 1, true, false, std::nullopt},
      {"divisor_override", {3, 2}, {2, 3}, {1, 1}, true, false, 5},
  };
  for (const Case& c : cases) {
    const Fn fused = [c](const Tensor& in) {
      return F::avg_pool2d(in, c.k, c.s, c.p, c.ceil, c.include_pad, c.divisor);
    };
    expect_same("avg_pool2d " + c.what, fused,
                separable(
                    fused,
                    [c](int64_t out, int64_t in) {
                      return D::avg_pool_axis(out, in, c.k.h, c.s.h, c.p.h, c.include_pad,
                                              c.divisor, false);
                    },
                    [c](int64_t out, int64_t in) {
                      return D::avg_pool_axis(out, in, c.k.w, c.s.w, c.p.w, c.include_pad,
                                              c.divisor, true);
                    }),
                x);
  }
  for (tl::nn::IntPair size :
       {tl::nn::IntPair{3, 4}, tl::nn::IntPair{9, 1}, tl::nn::IntPair{6, 7}}) {
    const Fn fused = [size](const Tensor& in) { return F::adaptive_avg_pool2d(in, size); };
    expect_same("adaptive_avg_pool2d " + std::to_string(size.h) + "x" + std::to_string(size.w),
                fused, separable(fused, D::adaptive_pool_axis, D::adaptive_pool_axis), x);
  }
}

TEST(ComposedImageOps, UpsamplingIsSeparable) {
  const Tensor x = input(4);
  using Opt = std::optional<tl::nn::DoublePair>;
  using Size = std::optional<tl::nn::IntPair>;
  struct Case {
    std::string what;
    Size size;
    Opt scale;
  };
  const std::vector<Case> cases = {{"size 11x13", tl::nn::IntPair{11, 13}, std::nullopt},
                                   {"scale 2", std::nullopt, tl::nn::DoublePair{2.0, 2.0}},
                                   {"scale 1.7x0.6", std::nullopt, tl::nn::DoublePair{1.7, 0.6}},
                                   {"size 3x3", tl::nn::IntPair{3, 3}, std::nullopt}};
  for (const Case& c : cases) {
    auto scale_h = [c]() { return c.scale ? std::optional<double>(c.scale->h) : std::nullopt; };
    auto scale_w = [c]() { return c.scale ? std::optional<double>(c.scale->w) : std::nullopt; };
    const Fn nearest = [c](const Tensor& in) {
      return F::interpolate(in, c.size, c.scale, "nearest");
    };
    expect_same(
        "nearest " + c.what, nearest,
        separable(
            nearest, [=](int64_t out, int64_t in) { return D::nearest_axis(in, out, scale_h()); },
            [=](int64_t out, int64_t in) { return D::nearest_axis(in, out, scale_w()); }),
        x);
    for (bool align : {false, true}) {
      const Fn bilinear = [c, align](const Tensor& in) {
        return F::interpolate(in, c.size, c.scale, "bilinear", align);
      };
      expect_same("bilinear " + c.what + (align ? " align_corners" : ""), bilinear,
                  separable(
                      bilinear,
                      [=](int64_t out, int64_t in) {
                        return D::linear_axis(in, out, scale_h(), align, tl::kFloat64);
                      },
                      [=](int64_t out, int64_t in) {
                        return D::linear_axis(in, out, scale_w(), align, tl::kFloat64);
                      }),
                  x);
    }
  }
}

}  // namespace
