// Autograd: every differentiable op against central finite differences in float64, on
// contiguous, non-contiguous and broadcast inputs; PyTorch's semantics; memory behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <tensorlib/autograd/engine.h>
#include <tensorlib/autograd/grad_mode.h>
#include <tensorlib/tensorlib.h>

#include "tensorlib/gradcheck.h"

namespace {

using tl::Tensor;
using tl_test::at;
using tl_test::gradcheck;
using tl_test::randd;
using Fn = tl_test::Fn;

TEST(Gradcheck, ArithmeticWithBroadcastingAndStrides) {
  tl::manual_seed(1);
  Tensor a = randd({3, 1}), b = randd({1, 4}), c = randd({4, 3});
  gradcheck("add", [](const auto& x) { return tl::add(x[0], x[1], 2.5); }, {a, b});
  gradcheck("sub", [](const auto& x) { return x[0] - x[1]; }, {a, b});
  gradcheck("mul", [](const auto& x) { return x[0] * x[1]; }, {a, b});
  gradcheck("div", [](const auto& x) { return x[0] / x[1]; }, {a, randd({1, 4}, 0.5, 2)});
  // Non-contiguous operand: a transposed view.
  gradcheck("mul_t", [](const auto& x) { return x[0] * x[1].t(); }, {randd({3, 4}), c});
  gradcheck("scalar", [](const auto& x) { return (x[0] * 3 + 1) / 2 - 4; }, {a});
  gradcheck("rsub_rdiv", [](const auto& x) { return 2 - 3 / x[0]; }, {randd({5}, 0.5, 2)});
  gradcheck("pow_scalar", [](const auto& x) { return x[0].pow(2.5); }, {randd({5}, 0.5, 2)});
  gradcheck("pow_tensor", [](const auto& x) { return x[0].pow(x[1]); },
            {randd({2, 3}, 0.5, 2), randd({3}, -1, 2)});
  gradcheck("scalar_pow", [](const auto& x) { return tl::pow(2.0, x[0]); }, {randd({4})});
}

TEST(Gradcheck, Unary) {
  tl::manual_seed(2);
  Tensor x = randd({2, 3});
  Tensor pos = randd({2, 3}, 0.5, 2);
  Tensor away = tl::where(x.abs() < 0.1, x + 0.3, x);  // no kinks at 0
  gradcheck("neg", [](const auto& v) { return -v[0]; }, {x});
  gradcheck("abs", [](const auto& v) { return v[0].abs(); }, {away});
  gradcheck("relu", [](const auto& v) { return v[0].relu(); }, {away});
  gradcheck("exp", [](const auto& v) { return v[0].exp(); }, {x});
  gradcheck("log", [](const auto& v) { return v[0].log(); }, {pos});
  gradcheck("sqrt", [](const auto& v) { return v[0].sqrt(); }, {pos});
  gradcheck("rsqrt", [](const auto& v) { return v[0].rsqrt(); }, {pos});
  gradcheck("sin", [](const auto& v) { return v[0].sin(); }, {x});
  gradcheck("cos", [](const auto& v) { return v[0].cos(); }, {x});
  gradcheck("tanh", [](const auto& v) { return v[0].tanh(); }, {x});
  gradcheck("sigmoid", [](const auto& v) { return v[0].sigmoid(); }, {x});
  gradcheck("gelu", [](const auto& v) { return v[0].gelu(); }, {x});
  gradcheck("reciprocal", [](const auto& v) { return v[0].reciprocal(); }, {pos});
  gradcheck("clamp", [](const auto& v) { return v[0].clamp(-0.5, 0.5); }, {away});
  Tensor mask = tl::tensor({{true, false, true}, {false, false, true}});
  gradcheck("where", [&](const auto& v) { return tl::where(mask, v[0], v[1]); }, {x, randd({3})});
  gradcheck("masked_fill", [&](const auto& v) { return v[0].masked_fill(mask, 2.0); }, {x});
}

TEST(Gradcheck, Reductions) {
  tl::manual_seed(3);
  Tensor x = randd({3, 4});
  gradcheck("sum", [](const auto& v) { return v[0].sum(); }, {x});
  gradcheck("sum_dim", [](const auto& v) { return v[0].sum({1}); }, {x});
  gradcheck("sum_keep", [](const auto& v) { return v[0].t().sum({0}, true); }, {x});
  gradcheck("mean", [](const auto& v) { return v[0].mean({0, 1}); }, {x});
  gradcheck("prod", [](const auto& v) { return v[0].prod(1); }, {randd({3, 4}, 0.5, 1.5)});
  gradcheck("max_all", [](const auto& v) { return v[0].max(); }, {x});
  gradcheck("min_dim", [](const auto& v) { return std::get<0>(v[0].min(1)); }, {x});
  gradcheck("max_dim_keep", [](const auto& v) { return std::get<0>(v[0].max(0, true)); }, {x});
  gradcheck("var", [](const auto& v) { return v[0].var({1}); }, {x});
  gradcheck("var_biased", [](const auto& v) { return v[0].var({0}, false, true); }, {x});
  gradcheck("std", [](const auto& v) { return v[0].std({1}); }, {x});
  gradcheck("logsumexp", [](const auto& v) { return v[0].logsumexp({1}); }, {x});
  gradcheck("softmax", [](const auto& v) { return v[0].softmax(1); }, {x});
  gradcheck("log_softmax", [](const auto& v) { return v[0].log_softmax(0); }, {x});
}

TEST(Gradcheck, MatmulShapeRules) {
  tl::manual_seed(4);
  gradcheck("dot", [](const auto& v) { return tl::matmul(v[0], v[1]); }, {randd({3}), randd({3})});
  gradcheck("mv", [](const auto& v) { return tl::matmul(v[0], v[1]); },
            {randd({2, 3}), randd({3})});
  gradcheck("vm", [](const auto& v) { return tl::matmul(v[0], v[1]); },
            {randd({3}), randd({3, 2})});
  gradcheck("mm", [](const auto& v) { return tl::mm(v[0], v[1]); }, {randd({2, 3}), randd({3, 4})});
  gradcheck("mm_t", [](const auto& v) { return tl::matmul(v[0].t(), v[1]); },
            {randd({3, 2}), randd({3, 4})});
  gradcheck("batched_broadcast", [](const auto& v) { return tl::matmul(v[0], v[1]); },
            {randd({2, 1, 2, 3}), randd({3, 3, 2})});
  gradcheck("batched_vec", [](const auto& v) { return tl::matmul(v[0], v[1]); },
            {randd({2, 2, 3}), randd({3})});
  gradcheck("bmm", [](const auto& v) { return tl::bmm(v[0], v[1]); },
            {randd({2, 2, 3}), randd({2, 3, 2})});
  gradcheck("addmm", [](const auto& v) { return tl::addmm(v[0], v[1], v[2], 0.5, 2.0); },
            {randd({4}), randd({2, 3}), randd({3, 4})});
}

TEST(Gradcheck, ViewsAndIndexing) {
  tl::manual_seed(5);
  Tensor x = randd({3, 4});
  gradcheck("view", [](const auto& v) { return v[0].view({4, 3}); }, {x});
  gradcheck("reshape_copy", [](const auto& v) { return v[0].t().reshape({-1}); }, {x});
  gradcheck("permute", [](const auto& v) { return v[0].permute({2, 0, 1}); }, {randd({2, 3, 2})});
  gradcheck("narrow", [](const auto& v) { return v[0].narrow(1, 1, 2); }, {x});
  gradcheck("slice", [](const auto& v) { return v[0].slice(1, 0, 4, 2); }, {x});
  gradcheck("select", [](const auto& v) { return v[0].select(0, 2) * v[0][0]; }, {x});
  gradcheck("expand", [](const auto& v) { return v[0].expand({2, 3, 4}); }, {randd({3, 1})});
  gradcheck("squeeze", [](const auto& v) { return v[0].unsqueeze(0).squeeze(); }, {x});
  gradcheck("flatten", [](const auto& v) { return v[0].flatten(); }, {randd({2, 2, 2})});
  gradcheck("diagonal", [](const auto& v) { return v[0].diagonal(1); }, {x});
  gradcheck("split",
            [](const auto& v) {
              auto parts = v[0].split(2, 1);
              return parts[0] * parts[1];
            },
            {x});
  Tensor idx = tl::tensor({2, 0, 2});
  gradcheck("index_select", [&](const auto& v) { return v[0].index_select(0, idx); }, {x});
  Tensor gidx = tl::tensor({{0, 3}, {1, 1}, {2, 0}});
  gradcheck("gather", [&](const auto& v) { return v[0].gather(1, gidx); }, {x});
  gradcheck("scatter_add", [&](const auto& v) { return v[0].scatter_add(1, gidx, v[1]); },
            {x, randd({3, 2})});
  gradcheck("cat", [](const auto& v) { return tl::cat({v[0], v[1]}, 1); }, {x, randd({3, 2})});
  gradcheck("stack", [](const auto& v) { return tl::stack({v[0], v[1]}, 1); }, {x, randd({3, 4})});
  gradcheck("clone_contiguous", [](const auto& v) { return v[0].t().contiguous().clone(); }, {x});
  gradcheck(
      "to_float32", [](const auto& v) { return v[0].to(tl::kFloat32).to(tl::kFloat64); }, {x}, 1e-3,
      1e-3);
}

TEST(AutogradSemantics, SecondBackwardWithoutRetainGraphRaisesPyTorchsError) {
  Tensor x = tl::tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (x.exp() * 2).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();                                           // allowed: the first kept the graph
  EXPECT_NEAR(at(x.grad(), 0), 4 * std::exp(1.0), 1e-5);  // accumulated twice
  try {
    y.backward();
    FAIL() << "a third backward must fail";
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Trying to backward through the graph a second time"),
              std::string::npos);
  }
}

TEST(AutogradSemantics, ModifyingASavedTensorInPlaceIsAnError) {
  Tensor x = tl::tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor z = y.exp();  // saves its output
  z.add_(1);           // version 1
  try {
    z.sum().backward();
    FAIL();
  } catch (const tl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("modified by an inplace operation: [tl.float32 [3]]"), std::string::npos) << m;
    EXPECT_NE(m.find("is at version 1; expected version 0 instead"), std::string::npos) << m;
  }
}

TEST(AutogradSemantics, NoGradDetachAndLeaves) {
  Tensor x = tl::ones({2}).requires_grad_();
  {
    tl::NoGradGuard no_grad;
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    {
      tl::EnableGradGuard enable;
      EXPECT_TRUE((x * 2).requires_grad());
    }
  }
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage(), x.storage());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE((x * 2).is_leaf());
  EXPECT_EQ((x * 2).grad_fn()->name(), "MulBackward0");
  EXPECT_THROW(x.add_(1), tl::Error);  // a leaf that requires grad
  EXPECT_THROW(tl::ones({2}, tl::kInt64).requires_grad_(), tl::Error);
}

TEST(AutogradSemantics, InPlaceOnANonLeafKeepsGradientsRight) {
  Tensor x = tl::tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3;
  y.exp_();  // y = exp(3x): its history moves to the new node
  y.mul_(x);
  y.sum().backward();
  for (int i = 0; i < 2; ++i) {
    double xv = i + 1.0;
    EXPECT_NEAR(at(x.grad(), i), std::exp(3 * xv) * (3 * xv + 1), 1e-3);  // d/dx x e^{3x}
  }
  // As in PyTorch, an in-place op whose other operand is the tensor itself overwrites a
  // saved value: y.mul_(y) then backward raises the version error.
  Tensor z = x * 3;
  z.mul_(z);
  EXPECT_THROW(z.sum().backward(), tl::Error);
}

TEST(AutogradSemantics, HooksRetainGradAndGradFunction) {
  Tensor x = tl::tensor({1.0, 2.0}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 10; });
  Tensor y = x * x;
  y.retain_grad();
  y.register_hook([](const Tensor& g) { return g * 2; });
  int post = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor&) { ++post; });
  y.sum().backward();
  EXPECT_NEAR(at(y.grad(), 0), 1.0, 1e-6);             // retained before y's own hook ran
  EXPECT_NEAR(at(x.grad(), 1), 2 * 2 * 2 * 10, 1e-5);  // 2x * 2 (y hook) * 10 (x hook)
  EXPECT_EQ(post, 1);

  Tensor a = tl::tensor({3.0}).requires_grad_(), b = tl::tensor({4.0}).requires_grad_();
  Tensor unused = tl::tensor({1.0}).requires_grad_();
  auto g = tl::autograd::grad({(a * b).sum()}, {a, b, unused}, {}, std::nullopt, false,
                              /*allow_unused=*/true);
  EXPECT_NEAR(at(g[0], 0), 4.0, 1e-6);
  EXPECT_NEAR(at(g[1], 0), 3.0, 1e-6);
  EXPECT_FALSE(g[2].defined());
  EXPECT_FALSE(a.grad().defined());  // grad() does not accumulate
  EXPECT_THROW(tl::autograd::grad({(a * 2).sum()}, {b}), tl::Error);
}

TEST(AutogradSemantics, DoubleBackwardOfElementwiseOps) {
  Tensor x = tl::tensor({1.5, -2.0}).requires_grad_();
  Tensor y = (x * x * x).sum();
  auto g = tl::autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  auto gg = tl::autograd::grad({g[0].sum()}, {x});
  EXPECT_NEAR(at(gg[0], 0), 6 * 1.5, 1e-5);  // d2/dx2 x^3 = 6x
  EXPECT_NEAR(at(gg[0], 1), 6 * -2.0, 1e-5);
}

TEST(AutogradSemantics, NonScalarBackwardNeedsAGradient) {
  Tensor x = tl::tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2;
  EXPECT_THROW(y.backward(), tl::Error);
  y.backward(tl::tensor({1.0, 0.5}));
  EXPECT_NEAR(at(x.grad(), 1), 1.0, 1e-6);
}

// Memory through the allocator's own statistics.
TEST(AutogradMemory, BackwardFreesSavedActivationsUnlessRetained) {
  const tl::Device cpu("cpu");
  const int64_t n = 1 << 18;  // 1 MiB of float32 per tensor
  Tensor x = tl::rand({n}).requires_grad_();
  for (bool retain : {false, true}) {
    x.mutable_grad() = Tensor();
    int64_t base = tl::memory_allocated(cpu);
    Tensor loss = x.exp().sin().sum();  // exp's output is saved by both nodes
    int64_t after_forward = tl::memory_allocated(cpu);
    EXPECT_GE(after_forward - base, 4 * n) << "the saved activation is allocated";
    loss.backward(Tensor(), retain);
    int64_t after_backward = tl::memory_allocated(cpu);
    int64_t grad_bytes = 4 * n;
    if (retain) {
      EXPECT_GE(after_backward - base, grad_bytes + 4 * n) << "retain_graph keeps activations";
    } else {
      EXPECT_LT(after_backward - base, grad_bytes + 4 * n) << "activations freed by backward";
    }
  }
}

TEST(AutogradMemory, AccumulatingTheLossTensorKeepsEveryGraphAlive) {
  const tl::Device cpu("cpu");
  Tensor w = tl::rand({256, 256}).requires_grad_();
  auto step_memory = [&](bool leak) {
    int64_t start = tl::memory_allocated(cpu);
    Tensor total = tl::zeros({});
    double total_item = 0;
    std::vector<int64_t> growth;
    for (int i = 0; i < 5; ++i) {
      Tensor x = tl::rand({64, 256});
      Tensor loss = tl::matmul(x, w).tanh().mean();
      if (leak)
        total = total + loss;  // keeps loss's graph (and its activations) alive
      else
        total_item += loss.item<double>();
      growth.push_back(tl::memory_allocated(cpu) - start);
    }
    return growth;
  };
  auto leaky = step_memory(true);
  auto fixed = step_memory(false);
  EXPECT_GT(leaky.back(), leaky.front() + 3 * 64 * 256 * 4) << "each iteration keeps its graph";
  EXPECT_EQ(fixed.back(), fixed.front()) << "loss.item() keeps nothing";
}

}  // namespace

namespace {
// Regression: a node that saved a tensor which then became that node's output (z.mul_(z))
// formed a reference cycle, leaking the graph (found by LeakSanitizer).
TEST(AutogradSemantics, SavedOutputsDoNotKeepTheirNodesAlive) {
  std::weak_ptr<tl::autograd::Node> weak;
  {
    Tensor x = tl::tensor({1.0, 2.0}).requires_grad_();
    Tensor y = x.exp();  // ExpBackward saves its own output
    weak = y.grad_fn();
    Tensor z = x * 3;
    z.mul_(z);
  }
  EXPECT_TRUE(weak.expired());
}

TEST(AutogradSemantics, DoubleBackwardThroughASavedOutput) {
  Tensor x = tl::tensor({0.5, -1.0}).requires_grad_();
  auto g = tl::autograd::grad({x.exp().sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  auto gg = tl::autograd::grad({g[0].sum()}, {x});
  EXPECT_NEAR(at(gg[0], 0), std::exp(0.5), 1e-5);  // d2/dx2 e^x = e^x
}
}  // namespace

namespace {
// Saved tensors are announced as activations and gradients as gradients, so a trace shows
// activation memory (Note [Autograd memory categories]).
TEST(AutogradMemory, SavedTensorsAndGradientsCarryTheirCategory) {
  namespace ev = tidemark::events;
  struct Categories final : ev::Sink {
    void on_event(const ev::Event& e) noexcept override {
      if (e.kind == ev::Kind::category) seen.emplace_back(e.category.addr, e.category.category);
    }
    std::vector<std::pair<uint64_t, ev::Category>> seen;
  } sink;
  Tensor x = tl::rand({1000}).requires_grad_();
  ev::add_sink(&sink);
  Tensor y = x.exp();  // saves its output y
  auto y_addr = reinterpret_cast<uint64_t>(y.storage()->data());
  y.sum().backward();
  ev::remove_sink(&sink);
  auto x_grad_addr = reinterpret_cast<uint64_t>(x.grad().storage()->data());
  bool activation = false, gradient = false, released = false;
  for (auto& [addr, c] : sink.seen) {
    activation |= addr == y_addr && c == ev::Category::activation;
    released |= addr == y_addr && c == ev::Category::unknown;  // y is still held here
    gradient |= addr == x_grad_addr && c == ev::Category::gradient;
  }
  EXPECT_TRUE(activation);
  EXPECT_TRUE(released);
  EXPECT_TRUE(gradient);
}
}  // namespace

#include <tensorlib/autograd/checkpoint.h>

namespace {
// A 20-layer MLP: checkpointing each block of 5 layers keeps only the block boundaries, so
// forward+backward peaks lower, with the same gradients.
TEST(Checkpoint, LowersThePeakOfA20LayerMlpWithTheSameGradients) {
  const tl::Device cpu("cpu");
  tl::manual_seed(11);
  std::vector<Tensor> ws;
  for (int i = 0; i < 20; ++i) ws.push_back((tl::randn({256, 256}) * 0.06).requires_grad_());
  Tensor x = tl::randn({512, 256});
  auto block = [&](int first) {
    return [&, first](const Tensor& h) {
      Tensor y = h;
      for (int i = first; i < first + 5; ++i) y = tl::matmul(y, ws[i]).tanh();
      return y;
    };
  };
  auto run = [&](bool use_checkpoint) {
    for (auto& w : ws) w.mutable_grad() = Tensor();
    tl::reset_peak_memory_stats(cpu);
    int64_t base = tl::memory_allocated(cpu);
    Tensor h = x;
    for (int b = 0; b < 4; ++b)
      h = use_checkpoint ? tl::checkpoint(block(5 * b), h) : block(5 * b)(h);
    h.pow(2).mean().backward();
    return tl::max_memory_allocated(cpu) - base;
  };
  int64_t plain = run(false);
  std::vector<Tensor> grads_plain;
  for (auto& w : ws) grads_plain.push_back(w.grad().clone());
  int64_t checkpointed = run(true);
  for (size_t i = 0; i < ws.size(); ++i)
    EXPECT_TRUE(tl::allclose(ws[i].grad(), grads_plain[i], 1e-4, 1e-6)) << "layer " << i;
  // 20 saved activations of 512 KiB each without; about 4 boundaries + one block with.
  EXPECT_LT(checkpointed, plain * 6 / 10)
      << "plain " << plain << " B, checkpointed " << checkpointed;
  std::printf("20-layer MLP forward+backward peak: %.1f MiB plain, %.1f MiB checkpointed\n",
              plain / 1048576.0, checkpointed / 1048576.0);
}
}  // namespace

#include <tensorlib/autograd/custom_function.h>

namespace {
namespace ag = tl::autograd;

// y = k * exp(x), with the output saved for backward, as a custom function.
struct ScaledExp : ag::Function<ScaledExp> {
  static Tensor forward(ag::AutogradContext* ctx, Tensor x, double k) {
    Tensor y = x.exp() * k;
    ctx->saved_data["k"] = k;
    ctx->save_for_backward({y});
    return y;
  }
  static ag::variable_list backward(ag::AutogradContext* ctx, ag::variable_list grads) {
    Tensor y = ctx->get_saved_variables()[0];
    EXPECT_TRUE(ctx->needs_input_grad(0));
    EXPECT_FALSE(ctx->needs_input_grad(1));
    return {grads[0] * y, Tensor()};  // d/dx k e^x = y; nothing for k
  }
};

// Sorts nothing, returns (values, mask) with the mask non-differentiable.
struct WithMask : ag::Function<WithMask> {
  static std::vector<Tensor> forward(ag::AutogradContext* ctx, Tensor x) {
    Tensor mask = x > 0;
    ctx->mark_non_differentiable({mask});
    return {x * 2, mask};
  }
  static ag::variable_list backward(ag::AutogradContext*, ag::variable_list grads) {
    return {grads[0] * 2};
  }
};

struct WrongCount : ag::Function<WrongCount> {
  static Tensor forward(ag::AutogradContext*, Tensor x) { return x * 1; }
  static ag::variable_list backward(ag::AutogradContext*, ag::variable_list g) {
    return {g[0], g[0]};
  }
};

TEST(CustomFunction, ForwardBackwardSavedTensorsAndNonDifferentiableOutputs) {
  gradcheck("custom", [](const auto& v) { return ScaledExp::apply(v[0], 3.0); }, {randd({4})});
  Tensor x = tl::tensor({1.0, -2.0}).requires_grad_();
  auto outs = WithMask::apply(x);
  EXPECT_TRUE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].requires_grad());
  outs[0].sum().backward();
  EXPECT_NEAR(at(x.grad(), 1), 2.0, 1e-9);
  EXPECT_THROW(WrongCount::apply(x).sum().backward(), tl::Error);
  {
    tl::NoGradGuard no_grad;
    EXPECT_FALSE(ScaledExp::apply(x, 2.0).requires_grad());
  }
}
}  // namespace

namespace {
TEST(AutogradSemantics, InferenceTensorsCannotJoinAGraph) {
  Tensor w = tl::ones({3}).requires_grad_();
  Tensor t;
  {
    tl::InferenceMode guard;
    t = tl::ones({3}) * 2;
    EXPECT_FALSE((w * 2).requires_grad());
    EXPECT_TRUE(t.is_inference());
  }
  EXPECT_TRUE(tl::is_grad_enabled());
  try {
    (w * t).sum().backward();  // mul saves t for backward
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Inference tensors cannot be saved for backward"),
              std::string::npos);
  }
  EXPECT_THROW(t.requires_grad_(), tl::Error);
  Tensor ok = t.clone();  // a normal tensor
  EXPECT_FALSE(ok.is_inference());
  (w * ok).sum().backward();
  EXPECT_NEAR(at(w.grad(), 0), 2.0, 1e-6);
}
}  // namespace

namespace {
// PyTorch's x[0].mul_(2) case: an in-place op on a view of a non-leaf rewrites the base's
// history, so gradients through the base stay right.
TEST(AutogradSemantics, InPlaceOnAViewRewritesTheBasesHistory) {
  Tensor x = tl::tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
  Tensor y = x * 3;
  y[0].mul_(x[1]);  // y = [[3*x00*x10, 3*x01*x11], [3*x10, 3*x11]]
  (y * y).sum().backward();
  // d/dx00 (3 x00 x10)^2 = 18 x00 x10^2; d/dx10 = 18 x00^2 x10 + 18 x10.
  EXPECT_NEAR(at(x.grad(), 0), 18 * 1.0 * 9.0, 1e-6);
  EXPECT_NEAR(at(x.grad(), 1), 18 * 2.0 * 16.0, 1e-6);
  EXPECT_NEAR(at(x.grad(), 2), 18 * 1.0 * 3.0 + 18 * 3.0, 1e-6);
  EXPECT_NEAR(at(x.grad(), 3), 18 * 4.0 * 4.0 + 18 * 4.0, 1e-6);
  // A view of a leaf that requires grad cannot be modified in place.
  Tensor w = tl::ones({2, 2}).requires_grad_();
  EXPECT_THROW(w[0].add_(1), tl::Error);
}
}  // namespace

namespace {
TEST(AutogradSemantics, AnomalyModeNamesTheNodeThatProducedNan) {
  Tensor x = tl::tensor({0.0, 1.0}).requires_grad_();
  {
    tl::DetectAnomalyGuard anomaly;
    // MulBackward sends 0 to sqrt; SqrtBackward computes 0 / (2 * sqrt(0)) = nan.
    Tensor y = x.sqrt() * 0;
    try {
      y.sum().backward();
      FAIL() << "anomaly mode must catch the nan";
    } catch (const tl::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("Function 'SqrtBackward0' returned nan values in its 0th output"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("Traceback of forward call"), std::string::npos) << m;
    }
  }
  x.mutable_grad() = Tensor();
  (x.sqrt() * 0).sum().backward();  // without anomaly mode the nan just propagates
  EXPECT_TRUE(std::isnan(at(x.grad(), 0)));
}
}  // namespace

namespace {
// Double backward: the gradient computed with create_graph is itself checked against finite
// differences (a gradgradcheck).
Fn first_derivative(const Fn& f) {
  return [f](const std::vector<Tensor>& x) {
    tl::EnableGradGuard enable;
    std::vector<Tensor> xs;
    for (const Tensor& t : x) xs.push_back(t.requires_grad() ? t : t.detach().requires_grad_());
    Tensor y = f(xs);
    return tl::autograd::grad({y.pow(2).sum()}, {xs[0]}, {}, std::nullopt,
                              /*create_graph=*/true)[0];
  };
}

TEST(Gradgradcheck, ElementwiseReductionsAndMatmul) {
  tl::manual_seed(8);
  Tensor x = randd({2, 3}), w = randd({3, 2});
  gradcheck("mul", first_derivative([](const auto& v) { return v[0] * v[0] * 3; }), {x}, 1e-6,
            1e-4);
  gradcheck("exp_tanh", first_derivative([](const auto& v) { return v[0].exp().tanh(); }), {x},
            1e-6, 1e-4);
  gradcheck("div_log",
            first_derivative([](const auto& v) { return (v[0] + 3).log() / (v[0] + 2); }), {x},
            1e-6, 1e-4);
  gradcheck("sum_mean", first_derivative([](const auto& v) { return v[0].sum({1}) * v[0].mean(); }),
            {x}, 1e-6, 1e-4);
  gradcheck("softmax", first_derivative([](const auto& v) { return v[0].softmax(1); }), {x}, 1e-6,
            1e-4);
  gradcheck("matmul",
            first_derivative([&](const auto& v) { return tl::matmul(v[0], w).sigmoid(); }), {x},
            1e-6, 1e-4);
  gradcheck("select_narrow", first_derivative([](const auto& v) {
              return v[0][0] * v[0].narrow(1, 0, 2).sum() + v[0].max();
            }),
            {x}, 1e-6, 1e-4);
  gradcheck("transpose_expand", first_derivative([](const auto& v) {
              return v[0].t().unsqueeze(0).expand({2, 3, 2}) * v[0].t();
            }),
            {x}, 1e-6, 1e-4);
}
}  // namespace

namespace {
TEST(Gradcheck, AsStridedAndDetachInPlace) {
  tl::manual_seed(9);
  gradcheck("as_strided",
            [](const auto& v) {
              return v[0].as_strided({2, 2}, {1, 3}, 1) * 2;
            },
            {randd({3, 3})});
  gradcheck("as_strided_of_view",
            [](const auto& v) {
              return v[0].t().as_strided({3}, {4}, 0);  // the diagonal, through a transposed view
            },
            {randd({3, 3})});
  Tensor x = tl::ones({2}).requires_grad_();
  Tensor y = x * 2;
  y.detach_();
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  Tensor v = (x * 2).narrow(0, 0, 1);
  EXPECT_THROW(v.detach_(), tl::Error);
}
}  // namespace
