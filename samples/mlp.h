// A two-layer MLP trained with hand-written backpropagation on Gaussian blobs: a real
// training loop (forward, backward, SGD update, per-step temporaries) for the profiler to
// record, until tensorlib's autograd and nn land. Used by samples/train_mlp, the recorder's
// tests and its benchmarks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>

#include <tensorlib/tensorlib.h>

namespace samples {

struct MlpConfig {
  int64_t classes = 4;
  int64_t features = 32;
  int64_t hidden = 128;
  int64_t batch = 64;
  int64_t steps = 200;
  double lr = 0.1;
  uint64_t seed = 0;
  bool verbose = false;
};

struct MlpResult {
  double first_loss = 0, last_loss = 0, accuracy = 0;
};

// Points around `classes` random centres; labels are the centre indices.
inline void make_blobs(const MlpConfig& c, int64_t n, tl::Tensor& x, tl::Tensor& y,
                       const tl::Tensor& centres) {
  y = tl::randint(0, c.classes, {n});
  x = centres.index_select(0, y) + tl::randn({n, c.features}) * 2.5;
}

// The model's parameters and one SGD step at a time.
class MlpTrainer {
 public:
  explicit MlpTrainer(const MlpConfig& c) : c_(c) {
    tl::manual_seed(c.seed);
    centres_ = tl::randn({c.classes, c.features}) * 1.5;
    // Kaiming-uniform-like initialisation, as nn.Linear.
    double b1 = 1.0 / std::sqrt(double(c.features)), b2 = 1.0 / std::sqrt(double(c.hidden));
    w1_ = (tl::rand({c.features, c.hidden}) * 2 - 1) * b1;
    bias1_ = tl::zeros({c.hidden});
    w2_ = (tl::rand({c.hidden, c.classes}) * 2 - 1) * b2;
    bias2_ = tl::zeros({c.classes});
  }

  // One training step; returns the batch loss.
  double step() {
    namespace prof = tl::profiler;
    prof::step();
    tl::Tensor x, y;
    {
      prof::Scope s("data");
      make_blobs(c_, c_.batch, x, y, centres_);
    }
    tl::Tensor h, a, p;
    {
      prof::Scope s("model.forward");
      h = tl::matmul(x, w1_) + bias1_;
      a = h.relu();
      p = (tl::matmul(a, w2_) + bias2_).softmax(1);
    }
    double loss;
    {
      prof::Scope s("loss");
      loss = -p.gather(1, y.unsqueeze(1)).log().mean().item<double>();
    }
    prof::Scope s("model.backward");
    tl::Tensor onehot =
        tl::zeros({c_.batch, c_.classes}).scatter_add(1, y.unsqueeze(1), tl::ones({c_.batch, 1}));
    tl::Tensor dlogits = (p - onehot) / double(c_.batch);
    tl::Tensor dw2 = tl::matmul(a.t(), dlogits);
    tl::Tensor db2 = dlogits.sum({0});
    tl::Tensor dh = tl::matmul(dlogits, w2_.t()) * (h > 0);
    tl::Tensor dw1 = tl::matmul(x.t(), dh);
    tl::Tensor db1 = dh.sum({0});
    prof::Scope u("optimizer.step");
    w1_.sub_(dw1, c_.lr);
    bias1_.sub_(db1, c_.lr);
    w2_.sub_(dw2, c_.lr);
    bias2_.sub_(db2, c_.lr);
    return loss;
  }

  // Accuracy on fresh points.
  double evaluate(int64_t n = 1024) {
    tl::Tensor x, y;
    make_blobs(c_, n, x, y, centres_);
    tl::Tensor logits = tl::matmul(tl::matmul(x, w1_).add(bias1_).relu(), w2_) + bias2_;
    return logits.argmax(1).eq(y).to(tl::kFloat64).mean().item<double>();
  }

 private:
  MlpConfig c_;
  tl::Tensor centres_, w1_, bias1_, w2_, bias2_;
};

inline MlpResult train_mlp(const MlpConfig& c) {
  MlpTrainer trainer(c);
  MlpResult r;
  for (int64_t step = 0; step < c.steps; ++step) {
    double loss = trainer.step();
    if (step == 0) r.first_loss = loss;
    r.last_loss = loss;
    if (c.verbose && (step % 50 == 0 || step + 1 == c.steps))
      std::printf("step %4lld  loss %.4f\n", static_cast<long long>(step), loss);
  }
  r.accuracy = trainer.evaluate();
  return r;
}

}  // namespace samples
