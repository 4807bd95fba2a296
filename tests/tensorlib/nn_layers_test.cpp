// tl::nn layers beyond Linear: batch_norm, layer_norm, dropout, embedding, silu and
// binary_cross_entropy_with_logits. Gradients against central differences in float64; values
// against PyTorch (tests/tensorlib/data/nn_layers_reference.py prints the numbers below).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include <tensorlib/nn/layers.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/nn/norm.h>
#include <tensorlib/tensorlib.h>

#include "tensorlib/gradcheck.h"

namespace {

using tl::Tensor;
using tl_test::gradcheck;
using tl_test::randd;
namespace nn = tl::nn;
namespace F = tl::nn::functional;

// x_k = sin(0.37 i + k) (1 + 0.1 k) + 0.05 k over the flat index i (as the reference script).
Tensor ref_input(int k, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor i = tl::arange(n, tl::kFloat64);
  return ((i * 0.37 + k).sin() * (1 + 0.1 * k) + 0.05 * k).reshape(shape);
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol,
                   const std::string& what) {
  Tensor flat = t.detach().contiguous().view({-1});
  ASSERT_GE(flat.numel(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<double>(), expected[i], tol)
        << what << " [" << i << "]";
}

// ---- BatchNorm -----------------------------------------------------------------------------

TEST(BatchNorm, GradientsInTrainingAndEvaluation) {
  tl::manual_seed(1);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{5, 3}, {3, 2, 4}, {2, 3, 2, 2}}) {
    const int64_t c = shape[1];
    Tensor w = randd({c}, 0.5, 1.5), b = randd({c});
    gradcheck("batch_norm train",
              [](const std::vector<Tensor>& in) {
                return F::batch_norm(in[0], {}, {}, in[1], in[2], /*training=*/true);
              },
              {randd(shape), w, b});
    gradcheck(
        "batch_norm train, no affine",
        [](const std::vector<Tensor>& in) { return F::batch_norm(in[0], {}, {}, {}, {}, true); },
        {randd(shape)});
    Tensor rm = randd({c}), rv = randd({c}, 0.5, 2.0);
    gradcheck("batch_norm eval",
              [&](const std::vector<Tensor>& in) {
                return F::batch_norm(in[0], rm, rv, in[1], in[2], /*training=*/false);
              },
              {randd(shape), w, b});
  }
  // Only the weight needs a gradient: the input's is not computed, the weight's is right.
  Tensor fixed = tl::tensor({{1.0, 2.0}, {3.0, -1.0}, {0.5, 0.0}, {2.0, 2.0}}, tl::kFloat64);
  gradcheck(
      "batch_norm weight only",
      [&](const std::vector<Tensor>& in) { return F::batch_norm(fixed, {}, {}, in[0], {}, true); },
      {randd({2}, 0.5, 1.5)});
}

TEST(BatchNorm, RunningStatisticsMatchPyTorch) {
  struct Case {
    std::shared_ptr<nn::BatchNorm> bn;
    std::vector<int64_t> shape;
    std::vector<double> train0, mean, var, eval3;
  };
  std::vector<Case> cases = {
      {std::make_shared<nn::BatchNorm2d>(3),
       {4, 3, 2, 2},
       {-0.15165682041555761, 0.60896214298438034, 1.2666348979129975, 1.732348522273071,
        0.84609642618479908, 0.82115679991250468},
       {0.041720541055313663, 0.0015259682001355218, -0.015073294133604339},
       {0.90120582076507849, 0.90431384208760868, 0.90270069945495712},
       {0.56096302366969997, -0.19401191334053108, -0.88603757858402343, -1.4214515447092226,
        -0.38708111426179809, -0.39899319893748658}},
      {std::make_shared<nn::BatchNorm1d>(3),
       {5, 3},
       {-0.13757003477708338, 0.39965697470176154, -0.56114073849485557, 1.8260329839384171,
        0.83584608407858707, -0.94151513974479695},
       {0.0078369474986992194, -0.001767335876566304, -0.0091699116544609743},
       {0.93446889470337757, 0.93012708663606369, 0.9277195904875748},
       {0.60526164611464073, 0.12607745858028432, 0.89506143263688687, -1.3415508962503651,
        -0.37717006086374522, 1.4716731494025286}},
      // momentum = None in PyTorch: the cumulative average.
      {std::make_shared<nn::BatchNorm1d>(3, 1e-5, std::nullopt),
       {2, 3, 4},
       {0.50939514446852208, 1.2548986514873055, 1.8995017561461462, 2.355960452199334,
        0.76271929085847323, 0.72367960485255822},
       {0.32521934023732813, 0.39589972823005015, -0.16249275971656452},
       {0.45151393885803115, 0.50649798562917414, 0.46366431899066063},
       {0.11838664740625024, -0.94822555482568771, -1.9259043923900407, -2.682325621121235,
        -0.86152008402039559, -0.87743691534460955}},
  };
  for (auto& c : cases) {
    auto& bn = *c.bn;
    bn.to(tl::kFloat64);
    {
      tl::NoGradGuard no_grad;
      bn.weight.copy_(tl::tensor({1.5, 0.5, -1.0}, tl::kFloat64));
      bn.bias.copy_(tl::tensor({0.1, 0.2, 0.3}, tl::kFloat64));
    }
    Tensor y0;
    for (int k = 0; k < 3; ++k) {
      Tensor y = bn(ref_input(k, c.shape));
      if (k == 0) y0 = y;
    }
    expect_values(y0, c.train0, 1e-12, "train output");
    expect_values(bn.running_mean, c.mean, 1e-12, "running_mean");
    expect_values(bn.running_var, c.var, 1e-12, "running_var");
    EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 3);
    EXPECT_EQ(bn.num_batches_tracked.dtype(), tl::kInt64);
    bn.eval();
    Tensor mean_before = bn.running_mean.clone();
    expect_values(bn(ref_input(3, c.shape)), c.eval3, 1e-12, "eval output");
    EXPECT_TRUE(tl::equal(bn.running_mean, mean_before)) << "eval must not update the statistics";
    EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 3);
  }
}

TEST(BatchNorm, BuffersStateDictAndErrors) {
  nn::BatchNorm2d bn(4);
  auto sd = bn.state_dict();
  std::vector<std::string> keys;
  for (auto& [k, v] : sd) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean",
                                            "running_var", "weight"}));
  EXPECT_EQ(bn.parameters().size(), 2u);
  EXPECT_TRUE(tl::equal(bn.running_var, tl::ones({4})));
  EXPECT_THROW(bn(tl::rand({2, 4})), tl::Error);        // BatchNorm2d wants 4-D
  EXPECT_THROW(bn(tl::rand({1, 4, 1, 1})), tl::Error);  // one value per channel
  EXPECT_THROW(bn(tl::rand({2, 3, 2, 2})), tl::Error);  // wrong channel count
  nn::BatchNorm1d plain(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_TRUE(plain.state_dict().empty());
  plain.eval();  // no running statistics: batch statistics even in evaluation
  Tensor y = plain(tl::tensor({{1.0, 2.0, 3.0}, {3.0, 2.0, 1.0}}));
  EXPECT_NEAR(y[0][0].item<double>(), -1.0, 1e-4);
  // The fused node saves the input, the weight and two per-channel vectors.
  Tensor x = tl::rand({8, 4, 3, 3}).requires_grad_();
  nn::BatchNorm2d bn2(4);
  Tensor out = bn2(x);
  EXPECT_EQ(out.grad_fn()->name(), "NativeBatchNormBackward0");
}

// Note [Fused normalisation backward]: between forward and backward, batch_norm keeps its
// input (alive anyway) and two per-channel vectors; a composite of elementwise ops keeps
// several input-sized intermediates.
TEST(BatchNorm, ForwardKeepsNoInputSizedIntermediates) {
  tl::manual_seed(6);
  Tensor x = tl::randn({32, 16, 16, 16}).requires_grad_();  // 512 KiB
  Tensor w = tl::ones({16}).requires_grad_(), b = tl::zeros({16}).requires_grad_();
  const int64_t input_bytes = static_cast<int64_t>(x.nbytes());
  auto held_after_forward = [&](auto f) {
    const int64_t before = tl::memory_allocated();
    Tensor y = f();
    const int64_t held = tl::memory_allocated() - before - static_cast<int64_t>(y.nbytes());
    y.sum().backward();
    return held;
  };
  const int64_t fused = held_after_forward([&] { return F::batch_norm(x, {}, {}, w, b, true); });
  const int64_t composite = held_after_forward([&] {
    std::vector<int64_t> dims{0, 2, 3}, shape{1, 16, 1, 1};
    Tensor mean = x.mean(dims, true);
    Tensor var = x.var(dims, false, true);
    return (x - mean) / (var + 1e-5).sqrt() * w.view(shape) + b.view(shape);
  });
  EXPECT_LT(fused, input_bytes / 16) << "fused holds " << fused << " bytes";
  EXPECT_GT(composite, input_bytes) << "composite holds " << composite << " bytes";
  std::cout << "held between forward and backward: fused " << fused << " B, composite " << composite
            << " B (input " << input_bytes << " B)\n";
}

// ---- LayerNorm -----------------------------------------------------------------------------

TEST(LayerNorm, GradientsAndPyTorchValues) {
  tl::manual_seed(2);
  gradcheck("layer_norm [3, 4] over [4]",
            [](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {4}, in[1], in[2]); },
            {randd({3, 4}), randd({4}), randd({4})});
  gradcheck("layer_norm [2, 2, 3] over [2, 3]",
            [](const std::vector<Tensor>& in) {
              return F::layer_norm(in[0], {2, 3}, in[1], in[2], 1e-3);
            },
            {randd({2, 2, 3}), randd({2, 3}), randd({2, 3})});
  gradcheck("layer_norm no affine, no leading dims",
            [](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {5}); }, {randd({5})});

  nn::LayerNorm ln({2, 3});
  ln.to(tl::kFloat64);
  {
    tl::NoGradGuard no_grad;
    ln.weight.copy_(tl::tensor({{1.0, 2.0, 0.5}, {-1.0, 1.5, 0.25}}, tl::kFloat64));
    ln.bias.copy_(tl::tensor({{0.0, 0.1, 0.2}, {0.3, 0.4, 0.5}}, tl::kFloat64));
  }
  expect_values(
      ln(ref_input(0, {4, 2, 3})),
      {-1.7939165900442333, -1.4860385408474823, 0.23620564620385137, -0.38524313168916374,
       1.8437984993470251, 0.71668727586827263, 1.4209562103379063, 1.9730003502626734},
      1e-12, "layer_norm");
  EXPECT_THROW(ln(tl::rand({4, 3, 2})), tl::Error);
  EXPECT_EQ(nn::LayerNorm({4}, 1e-5, true, /*bias=*/false).parameters().size(), 1u);
}

// ---- Dropout -------------------------------------------------------------------------------

TEST(Dropout, TrainingKeepsAFractionScaledEvalIsIdentity) {
  tl::manual_seed(7);
  nn::Dropout drop(0.3);
  Tensor x = tl::ones({200000});
  Tensor y = drop(x);
  Tensor kept = y.ne(0);
  double frac = kept.to(tl::kFloat64).mean().item<double>();
  EXPECT_NEAR(frac, 0.7, 0.005);  // 200000 draws: the standard deviation is 0.001
  // Every kept element is scaled by 1 / (1 - p); the mean is preserved.
  EXPECT_NEAR(y.max().item<double>(), 1 / 0.7, 1e-6);
  EXPECT_NEAR(tl::where(kept, y, 1 / 0.7).min().item<double>(), 1 / 0.7, 1e-6);
  EXPECT_NEAR(y.to(tl::kFloat64).mean().item<double>(), 1.0, 0.01);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  // Same seed, same mask.
  tl::manual_seed(7);
  EXPECT_TRUE(tl::equal(F::dropout(x, 0.3, true), y));
  // p = 1 gives zeros (and zero gradients); p = 0 the input itself.
  Tensor a = tl::rand({10}).requires_grad_();
  Tensor z = F::dropout(a, 1.0, true);
  EXPECT_EQ(z.abs().sum().item<double>(), 0.0);
  z.sum().backward();
  EXPECT_EQ(a.grad().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(F::dropout(a, 0.0, true).is_same(a));
  EXPECT_THROW(nn::Dropout(1.5), tl::Error);
}

TEST(Dropout, GradientIsTheScaledMask) {
  gradcheck("dropout",
            [](const std::vector<Tensor>& in) {
              tl::manual_seed(11);  // the same mask on every call
              return F::dropout(in[0], 0.4, true);
            },
            {randd({4, 5})});
  tl::manual_seed(11);
  Tensor x = randd({1000}).requires_grad_();
  Tensor y = F::dropout(x, 0.5, true);
  y.sum().backward();
  EXPECT_TRUE(tl::equal(x.grad(), y.ne(0).to(tl::kFloat64) * 2.0));
}

// ---- Embedding -----------------------------------------------------------------------------

TEST(Embedding, LookupPaddingAndGradient) {
  tl::manual_seed(4);
  nn::Embedding emb(6, 3, /*padding_idx=*/-2);  // row 4
  ASSERT_EQ(emb.padding_idx, 4);
  EXPECT_EQ(emb.weight.abs().sum().item<double>() > 0, true);
  EXPECT_EQ(emb.weight[4].abs().sum().item<double>(), 0.0);
  Tensor idx = tl::tensor({{0, 4, 2}, {2, 5, 4}});
  Tensor y = emb(idx);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_TRUE(tl::equal(y[1][2], emb.weight[4]));
  EXPECT_TRUE(tl::equal(y[0][2], emb.weight[2]));
  (y * 2).sum().backward();
  Tensor g = emb.weight.grad();
  // Row 2 is looked up twice, rows 0 and 5 once, the padding row (twice) gets nothing.
  EXPECT_TRUE(tl::equal(g.sum({1}), tl::tensor({6.0f, 0.0f, 12.0f, 0.0f, 0.0f, 6.0f})));
  EXPECT_THROW(emb(tl::tensor({1.0})), tl::Error);
  EXPECT_THROW(emb(tl::tensor({6})), tl::Error);
  EXPECT_THROW(nn::Embedding(3, 2, 3), tl::Error);

  // Without padding (the padding row's gradient is zero by definition, not by differences).
  gradcheck("embedding",
            [](const std::vector<Tensor>& in) {
              return F::embedding(tl::tensor({{1, 0}, {1, 3}, {2, 2}}), in[0]);
            },
            {randd({4, 3})});
}

// ---- SiLU and BCE with logits --------------------------------------------------------------

TEST(SiLU, ValuesAndGradient) {
  Tensor x = tl::tensor({-3.0, -0.5, 0.0, 0.5, 3.0}, tl::kFloat64);
  Tensor y = nn::SiLU()(x);
  for (int64_t i = 0; i < 5; ++i) {
    double v = x[i].item<double>();
    EXPECT_NEAR(y[i].item<double>(), v / (1 + std::exp(-v)), 1e-15);
  }
  gradcheck("silu", [](const std::vector<Tensor>& in) { return F::silu(in[0]); },
            {randd({3, 4}, -4, 4)});
}

TEST(BCEWithLogits, MatchesFormulaAndPyTorchIncludingExtremeLogits) {
  Tensor logits = tl::tensor({{-100.0, -3.0, 0.0}, {0.5, 2.0, 100.0}}, tl::kFloat64);
  Tensor target = tl::tensor({{0.0, 1.0, 1.0}, {0.25, 0.0, 1.0}}, tl::kFloat64);
  Tensor weight = tl::tensor({1.0, 2.0, 0.5}, tl::kFloat64);
  Tensor pos_weight = tl::tensor({3.0, 0.5, 2.0}, tl::kFloat64);
  // The formula, term by term, with log1p for accuracy: -[t log s + (1 - t) log(1 - s)].
  double expected = 0;
  for (int64_t i = 0; i < 6; ++i) {
    double x = logits.view({-1})[i].item<double>(), t = target.view({-1})[i].item<double>();
    double log_s = -std::log1p(std::exp(-std::fabs(x))) - std::max(-x, 0.0);  // log sigmoid(x)
    double log_1ms = log_s - x;                                               // log(1 - sigmoid)
    expected += -(t * log_s + (1 - t) * log_1ms);
  }
  Tensor plain = F::binary_cross_entropy_with_logits(logits, target);
  EXPECT_TRUE(std::isfinite(plain.item<double>()));
  EXPECT_NEAR(plain.item<double>(), expected / 6, 1e-12);
  EXPECT_NEAR(plain.item<double>(), 1.1196232545594611, 1e-12);  // PyTorch
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(logits, target, weight).item<double>(),
              1.9244468832822512, 1e-12);
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(logits, target, {}, pos_weight).item<double>(),
              1.020605254036649, 1e-12);
  Tensor x = logits.clone().requires_grad_();
  nn::BCEWithLogitsLoss loss(weight, pos_weight);
  Tensor both = loss(x, target);
  EXPECT_NEAR(both.item<double>(), 1.5136176717482988, 1e-12);
  both.backward();
  expect_values(x.grad(),
                {6.2001266267013923e-45, -0.15876235447040554, -0.083333333333333329,
                 0.030614832800463659, 0.29359902599262744, 0},
                1e-12, "d bce / d logits");
  // Wrong target at +-100 gives a loss of about 100, still finite.
  Tensor far = F::binary_cross_entropy_with_logits(tl::tensor({100.0, -100.0}, tl::kFloat64),
                                                   tl::tensor({0.0, 1.0}, tl::kFloat64));
  EXPECT_NEAR(far.item<double>(), 100.0, 1e-9);
  Tensor far32 =
      F::binary_cross_entropy_with_logits(tl::tensor({100.0f, -100.0f}), tl::tensor({0.0f, 1.0f}));
  EXPECT_NEAR(far32.item<double>(), 100.0, 1e-4);
  EXPECT_THROW(F::binary_cross_entropy_with_logits(logits, tl::zeros({3})), tl::Error);

  // Gradients for all four inputs, and at a logit of exactly 0 (d/dx = w (sigmoid(0) - t)).
  gradcheck("bce_with_logits",
            [](const std::vector<Tensor>& in) {
              return F::binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3]);
            },
            {randd({3, 4}, -5, 5), randd({3, 4}, 0, 1), randd({4}, 0.5, 2), randd({4}, 0.5, 3)});
  gradcheck("bce_with_logits plain",
            [](const std::vector<Tensor>& in) {
              return F::binary_cross_entropy_with_logits(in[0], in[1]);
            },
            {randd({5}, -5, 5), randd({5}, 0, 1)});
  Tensor zero = tl::zeros({2}, tl::kFloat64).requires_grad_();
  F::binary_cross_entropy_with_logits(zero, tl::tensor({1.0, 0.0}, tl::kFloat64)).backward();
  EXPECT_NEAR(zero.grad()[0].item<double>(), (0.5 - 1) / 2, 1e-15);
  EXPECT_NEAR(zero.grad()[1].item<double>(), 0.5 / 2, 1e-15);
}

TEST(LossObjects, CallTheFunctionalForms) {
  Tensor logits = tl::tensor({{1.0, 2.0, 0.5}, {0.0, 3.0, 1.0}});
  Tensor target = tl::tensor({1, 2});
  EXPECT_EQ(nn::CrossEntropyLoss()(logits, target).item<double>(),
            F::cross_entropy(logits, target).item<double>());
  EXPECT_EQ(nn::CrossEntropyLoss(-100, 0.1)(logits, target).item<double>(),
            F::cross_entropy(logits, target, -100, 0.1).item<double>());
  EXPECT_EQ(nn::NLLLoss()(logits.log_softmax(1), target).item<double>(),
            F::nll_loss(logits.log_softmax(1), target).item<double>());
  EXPECT_EQ(
      nn::MSELoss()(tl::tensor({1.0, 3.0}), tl::tensor({0.0, 1.0}, tl::kFloat64)).item<double>(),
      2.5);
}

}  // namespace
