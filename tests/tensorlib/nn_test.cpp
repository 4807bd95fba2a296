// tl::nn and tl::optim: module bookkeeping, scopes, losses against their formulas, and
// optimizer updates against PyTorch's update rules computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;
namespace nn = tl::nn;
namespace F = tl::nn::functional;

std::shared_ptr<nn::Sequential> mlp() {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::Linear>(4, 8));
  s->push_back(std::make_shared<nn::ReLU>());
  s->push_back(std::make_shared<nn::Linear>(8, 3));
  return s;
}

TEST(Module, NamesPathsAndInitialisation) {
  tl::manual_seed(0);
  auto m = mlp();
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(m->children()[2]->path(), "model.2");
  auto lin = std::dynamic_pointer_cast<nn::Linear>(m->children()[0]);
  ASSERT_TRUE(lin);
  EXPECT_EQ(lin->weight.sizes().vec(), (std::vector<int64_t>{8, 4}));
  EXPECT_LE(lin->weight.abs().max().item<double>(), 0.5);  // 1 / sqrt(in_features)
  EXPECT_TRUE(lin->weight.requires_grad());
  m->eval();
  EXPECT_FALSE(m->children()[1]->is_training());
}

TEST(Module, ForwardRunsInScopesNamedByPath) {
  namespace ev = tidemark::events;
  struct Scopes final : ev::Sink {
    void on_event(const ev::Event& e) noexcept override {
      if (e.kind == ev::Kind::scope_push) pushed.emplace_back(e.name.name);
    }
    std::vector<std::string> pushed;
  } sink;
  auto m = mlp();
  ev::add_sink(&sink);
  Tensor y = (*m)(tl::rand({2, 4}));
  ev::remove_sink(&sink);
  EXPECT_EQ(sink.pushed, (std::vector<std::string>{"model", "model.0", "model.1", "model.2"}));
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3}));
}

TEST(Module, StateDictRoundTripAndErrors) {
  auto a = mlp(), b = mlp();
  b->load_state_dict(a->state_dict());
  Tensor x = tl::rand({3, 4});
  EXPECT_TRUE(tl::equal((*a)(x), (*b)(x)));
  auto sd = a->state_dict();
  sd.erase("2.bias");
  EXPECT_THROW(b->load_state_dict(sd), tl::Error);
  sd = a->state_dict();
  sd["0.bias"] = tl::zeros({5});
  try {
    b->load_state_dict(sd);
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch for '0.bias'"), std::string::npos);
  }
  (*a)(x).sum().backward();
  EXPECT_TRUE(a->parameters()[0].grad().defined());
  a->zero_grad();
  EXPECT_FALSE(a->parameters()[0].grad().defined());  // set_to_none, as PyTorch 2
}

TEST(Module, ModuleListNamesIndexesAndIterates) {
  auto list = std::make_shared<nn::ModuleList>();
  list->push_back(std::make_shared<nn::Linear>(2, 3)).push_back(std::make_shared<nn::ReLU>());
  list->push_back(std::make_shared<nn::Linear>(3, 1, /*bias=*/false));
  ASSERT_EQ(list->size(), 3u);
  std::vector<std::string> names;
  for (auto& [n, p] : list->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  EXPECT_EQ((*list)[2]->path(), "model.2");
  EXPECT_EQ(list->at<nn::Linear>(0)->weight.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_FALSE(list->at<nn::Linear>(2)->bias.defined());
  EXPECT_THROW(list->at<nn::Linear>(1), tl::Error);
  EXPECT_THROW((*list)[3], tl::IndexError);
  EXPECT_THROW((*list)(tl::rand({1, 2})), tl::Error);  // no forward of its own
  // Iterating runs the layers in order.
  Tensor y = tl::rand({4, 2});
  int count = 0;
  for (const auto& m : *list) {
    y = (*m)(y);
    ++count;
  }
  EXPECT_EQ(count, 3);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{4, 1}));
  // Nested in a parent, names gain the parent's prefix.
  struct Net : nn::Module {
    Net() { blocks = register_module("blocks", std::make_shared<nn::ModuleList>()); }
    Tensor forward(const Tensor& x) override { return x; }
    std::shared_ptr<nn::ModuleList> blocks;
  };
  auto net = std::make_shared<Net>();
  net->blocks->push_back(std::make_shared<nn::Linear>(2, 2));
  EXPECT_EQ(net->named_parameters()[0].first, "blocks.0.weight");
  EXPECT_EQ((*net->blocks)[0]->path(), "model.blocks.0");
}

TEST(Module, ToConvertsParametersAndBuffersInPlace) {
  tl::manual_seed(5);
  auto m = mlp();
  auto lin = std::dynamic_pointer_cast<nn::Linear>(m->children()[0]);
  Tensor before = lin->weight;
  Tensor x = tl::rand({2, 4});
  (*m)(x).sum().backward();
  m->to(tl::kFloat64);
  // The module's own handle (lin->weight) sees the new tensor: a float64 leaf requiring grad.
  EXPECT_EQ(lin->weight.dtype(), tl::kFloat64);
  EXPECT_TRUE(lin->weight.is_leaf());
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_TRUE(lin->weight.is_same(m->named_parameters()[0].second));
  EXPECT_EQ(lin->weight.grad().dtype(), tl::kFloat64);
  EXPECT_TRUE(tl::allclose(lin->weight, before.to(tl::kFloat64)));
  for (auto& p : m->parameters()) EXPECT_EQ(p.dtype(), tl::kFloat64);
  Tensor y = (*m)(x.to(tl::kFloat64));
  EXPECT_EQ(y.dtype(), tl::kFloat64);
  // An optimizer made after to() trains the converted parameters.
  tl::optim::SGD sgd(m->parameters(), {.lr = 0.1});
  sgd.zero_grad();
  (*m)(x.to(tl::kFloat64)).sum().backward();
  Tensor w0 = lin->weight.clone();
  sgd.step();
  EXPECT_FALSE(tl::equal(lin->weight, w0));
  // to(device) on this build: cpu is the only device; tensors already there are kept.
  Tensor same = lin->weight;
  m->to(tl::Device(tl::kCPU));
  EXPECT_TRUE(lin->weight.is_same(same));
  EXPECT_THROW(m->to(tl::kInt64), tl::Error);
}

// What a trace's categories say about one training step: parameters stay `parameter` even
// while a Linear saves its weight for backward (and again after to()), model input stays
// `input`, a hidden activation is `activation` while its node holds it, gradients and
// optimizer state get theirs.
TEST(Module, TrainingMemoryIsCategorised) {
  namespace ev = tidemark::events;
  struct Categories final : ev::Sink {
    void on_event(const ev::Event& e) noexcept override {
      if (e.kind == ev::Kind::category) latest[e.category.addr] = e.category.category;
    }
    ev::Category of(const Tensor& t) const {
      auto it = latest.find(reinterpret_cast<uint64_t>(t.storage()->data()));
      return it == latest.end() ? ev::Category::unknown : it->second;
    }
    std::map<uint64_t, ev::Category> latest;
  } sink;
  ASSERT_TRUE(ev::add_sink(&sink));
  tl::manual_seed(3);
  auto lin1 = std::make_shared<nn::Linear>(4, 8), lin2 = std::make_shared<nn::Linear>(8, 3);
  lin1->to(tl::kFloat64);
  lin2->to(tl::kFloat64);
  tl::optim::Adam adam({lin1->weight, lin1->bias, lin2->weight, lin2->bias}, {.lr = 0.01});
  Tensor x = tl::rand({5, 4}, tl::kFloat64);
  tl::data::announce_input(x);
  Tensor hidden = tl::relu((*lin1)(x));
  Tensor loss = (*lin2)(hidden).sum();
  EXPECT_EQ(sink.of(hidden), ev::Category::activation);  // saved by lin2's matmul
  for (const Tensor* p : {&lin1->weight, &lin2->weight, &lin2->bias})
    EXPECT_EQ(sink.of(*p), ev::Category::parameter);
  EXPECT_EQ(sink.of(x), ev::Category::input);
  loss.backward();
  adam.step();
  ev::remove_sink(&sink);
  EXPECT_EQ(tl::memory_category(hidden), ev::Category::unknown);  // released, kept by the test
  for (const Tensor* p : {&lin1->weight, &lin1->bias, &lin2->weight, &lin2->bias}) {
    EXPECT_EQ(sink.of(*p), ev::Category::parameter);
    EXPECT_EQ(tl::memory_category(*p), ev::Category::parameter);
    EXPECT_EQ(sink.of(p->grad()), ev::Category::gradient);
  }
  EXPECT_EQ(sink.of(x), ev::Category::input);
  int state = 0;
  for (const auto& [addr, c] : sink.latest) state += c == ev::Category::optimizer_state;
  EXPECT_EQ(state, 8);  // exp_avg and exp_avg_sq of four parameters
}

TEST(Loss, CrossEntropyMatchesItsFormula) {
  Tensor logits =
      tl::tensor({{1.0, 2.0, 0.5, -1.0}, {0.0, 0.0, 3.0, 1.0}, {2.0, 1.0, 0.0, 0.0}}, tl::kFloat64);
  Tensor target = tl::tensor({1, 2, -100});
  // Rows 0 and 1 only (row 2 is ignored); plain and with label smoothing 0.1.
  double plain = 0, smooth = 0;
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (int c = 0; c < 4; ++c) lse += std::exp(logits[r][c].item<double>());
    lse = std::log(lse);
    int64_t t = target[r].item<int64_t>();
    plain += lse - logits[r][t].item<double>();
    double uniform = 0;
    for (int c = 0; c < 4; ++c) uniform += lse - logits[r][c].item<double>();
    smooth += 0.9 * (lse - logits[r][t].item<double>()) + 0.1 * uniform / 4;
  }
  EXPECT_NEAR(F::cross_entropy(logits, target).item<double>(), plain / 2, 1e-12);
  EXPECT_NEAR(F::cross_entropy(logits, target, -100, 0.1).item<double>(), smooth / 2, 1e-12);
  EXPECT_NEAR(F::mse_loss(tl::tensor({1.0, 3.0}), tl::tensor({0.0, 1.0})).item<double>(), 2.5,
              1e-12);
  EXPECT_THROW(F::cross_entropy(logits, tl::tensor({1.0, 2.0, 0.0})), tl::Error);
}

// One parameter, gradients set by hand, updates computed with PyTorch's formulas.
TEST(Optim, SgdMomentumNesterovWeightDecay) {
  Tensor p = tl::tensor({1.0}, tl::kFloat64).requires_grad_();
  tl::optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  double pv = 1.0, buf = 0;
  for (int step = 0; step < 3; ++step) {
    double g = 0.5 + step;
    p.mutable_grad() = tl::tensor({g}, tl::kFloat64);
    sgd.step();
    double gd = g + 0.01 * pv;
    buf = step == 0 ? gd : 0.9 * buf + gd;
    pv -= 0.1 * (gd + 0.9 * buf);
    EXPECT_NEAR(p.item<double>(), pv, 1e-12) << "step " << step;
  }
}

TEST(Optim, AdamAndAdamW) {
  for (bool decoupled : {false, true}) {
    Tensor p = tl::tensor({2.0}, tl::kFloat64).requires_grad_();
    tl::optim::AdamOptions o{
        .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    std::unique_ptr<tl::optim::Optimizer> opt =
        decoupled ? std::unique_ptr<tl::optim::Optimizer>(new tl::optim::AdamW({p}, o))
                  : std::unique_ptr<tl::optim::Optimizer>(new tl::optim::Adam({p}, o));
    double pv = 2.0, m = 0, v = 0;
    for (int t = 1; t <= 3; ++t) {
      double g = 0.3 * t;
      p.mutable_grad() = tl::tensor({g}, tl::kFloat64);
      opt->step();
      if (decoupled)
        pv *= 1 - 0.01 * 0.1;
      else
        g += 0.1 * pv;
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.999, t));
      pv -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
      EXPECT_NEAR(p.item<double>(), pv, 1e-9) << (decoupled ? "AdamW" : "Adam") << " step " << t;
    }
  }
}

// Note [Fused Adam]: the one-pass kernel gives the composed ops' update to the bit, for each
// decay rule and both floating dtypes, over sizes that take the vector loop's body and tail and
// the split across threads; its states are the composed ones too.
TEST(Optim, FusedAdamEqualsTheComposedUpdateBitForBit) {
  struct Rule {
    double weight_decay;
    bool decoupled;
  };
  for (tl::ScalarType dtype : {tl::kFloat32, tl::kFloat64})
    for (Rule rule : {Rule{0, false}, Rule{0.05, false}, Rule{0.05, true}})
      for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{70'003}}) {
        tl::manual_seed(11);
        Tensor start = tl::randn({n}).to(dtype);
        Tensor fused_p = start.clone().requires_grad_(),
               composed_p = start.clone().requires_grad_();
        tl::optim::AdamOptions o{.lr = 3e-3,
                                 .beta1 = 0.8,
                                 .beta2 = 0.99,
                                 .eps = 1e-6,
                                 .weight_decay = rule.weight_decay};
        auto make = [&](Tensor p, bool fused) {
          tl::optim::AdamOptions with = o;
          with.fused = fused;
          return rule.decoupled
                     ? std::unique_ptr<tl::optim::Optimizer>(new tl::optim::AdamW({p}, with))
                     : std::unique_ptr<tl::optim::Optimizer>(new tl::optim::Adam({p}, with));
        };
        auto fused = make(fused_p, true), composed = make(composed_p, false);
        for (int step = 0; step < 4; ++step) {
          Tensor g = tl::randn({n}).to(dtype) * (step + 1);
          fused_p.mutable_grad() = g.clone();
          composed_p.mutable_grad() = g.clone();
          // Once its states exist, the fused step allocates nothing: it is the path taken.
          const int64_t before = tl::memory_stats()["allocation.all.allocated"];
          fused->step();
          const int64_t fused_allocs = tl::memory_stats()["allocation.all.allocated"] - before;
          composed->step();
          if (step > 0) {
            ASSERT_EQ(fused_allocs, 0) << tl::dtype_name(dtype) << " n=" << n;
          }
          ASSERT_TRUE(tl::equal(fused_p, composed_p))
              << tl::dtype_name(dtype) << " n=" << n << " wd=" << rule.weight_decay
              << (rule.decoupled ? " AdamW" : " Adam") << " step " << step;
        }
        EXPECT_FALSE(tl::equal(fused_p, start)) << "the steps moved the parameter";
      }
}

// Note [Foreach Adam]: op by op over every parameter, the same update to the bit as one
// parameter at a time, with one denominator per parameter live at once: its step's peak holds
// a parameter-sized temporary more than the one-at-a-time step's.
TEST(Optim, ForeachAdamIsTheComposedUpdateWithAllDenominatorsAtOnce) {
  tl::manual_seed(5);
  std::vector<Tensor> a, b;
  int64_t param_bytes = 0;
  for (int k = 0; k < 8; ++k) {  // eight parameters of 256 KiB: a few temporaries of one
    const int64_t n = 65'536;    // are well under all eight
    Tensor start = tl::randn({n});
    a.push_back(start.clone().requires_grad_());
    b.push_back(start.clone().requires_grad_());
    param_bytes += n * 4;
  }
  tl::optim::AdamW foreach (a, {.lr = 3e-3, .weight_decay = 0.05, .fused = false, .foreach = true});
  tl::optim::AdamW one_at_a_time(b, {.lr = 3e-3, .weight_decay = 0.05, .fused = false});
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor g = tl::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const int64_t base = tl::memory_allocated();
    tl::reset_peak_memory_stats();
    foreach
      .step();
    const int64_t foreach_extra = tl::max_memory_allocated() - base;
    tl::reset_peak_memory_stats();
    one_at_a_time.step();
    const int64_t single_extra = tl::max_memory_allocated() - tl::memory_allocated();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(tl::equal(a[i], b[i])) << "step " << step;
    if (step == 0) continue;  // the first step also makes the moments
    EXPECT_GE(foreach_extra, param_bytes) << "step " << step;
    EXPECT_LT(single_extra, param_bytes) << "step " << step;
  }
}

TEST(Optim, FusedAdamLeavesHalfPrecisionToTheComposedOps) {
  Tensor p = tl::tensor({1.0, -2.0, 0.5}).to(tl::kFloat16).requires_grad_();
  Tensor q = p.detach().clone().requires_grad_();
  tl::optim::Adam fused({p}, {.lr = 0.1}), composed({q}, {.lr = 0.1, .fused = false});
  p.mutable_grad() = tl::tensor({0.5, 0.25, -1.0}).to(tl::kFloat16);
  q.mutable_grad() = p.grad().clone();
  fused.step();
  composed.step();
  EXPECT_TRUE(tl::equal(p, q));
  EXPECT_EQ(p.dtype(), tl::kFloat16);
  // Adam's first step moves each element by lr against its gradient's sign.
  EXPECT_NEAR(p.to(tl::kFloat64)[0].item<double>(), 0.9, 1e-3);
  EXPECT_NEAR(p.to(tl::kFloat64)[2].item<double>(), 0.6, 1e-3);
}

TEST(Optim, AnNnMlpLearnsGaussianBlobs) {
  tl::manual_seed(3);
  Tensor centres = tl::randn({3, 4}) * 2;
  auto m = mlp();
  tl::optim::Adam opt(m->parameters(), {.lr = 0.02});
  auto batch = [&](int64_t n, Tensor& x, Tensor& y) {
    y = tl::randint(0, 3, {n});
    x = centres.index_select(0, y) + tl::randn({n, 4}) * 0.5;
  };
  for (int step = 0; step < 150; ++step) {
    Tensor x, y;
    batch(64, x, y);
    opt.zero_grad();
    F::cross_entropy((*m)(x), y).backward();
    opt.step();
  }
  Tensor x, y;
  batch(1000, x, y);
  tl::NoGradGuard no_grad;
  double acc = (*m)(x).argmax(1).eq(y).to(tl::kFloat64).mean().item<double>();
  EXPECT_GT(acc, 0.9);
}

}  // namespace
