// tl::optim schedulers: the first 21 learning rates (epoch 0 and 20 steps) against PyTorch's
// (tests/tensorlib/data/scheduler_reference.py prints them).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <tensorlib/optim/optimizer.h>
#include <tensorlib/optim/scheduler.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;
namespace optim = tl::optim;

std::vector<double> rates(optim::Optimizer& opt, optim::LRScheduler& sched, int steps = 20) {
  std::vector<double> out{sched.get_last_lr().at(0)};
  EXPECT_EQ(opt.lr(), out[0]);
  for (int i = 0; i < steps; ++i) {
    opt.step();
    sched.step();
    out.push_back(sched.get_last_lr().at(0));
    EXPECT_EQ(opt.lr(), out.back()) << "the optimizer uses the scheduler's rate";
  }
  return out;
}

void expect_rates(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14) << "epoch " << i;
}

TEST(Scheduler, StepLRMatchesPyTorch) {
  Tensor p = tl::zeros({1}).requires_grad_();
  optim::SGD sgd({p}, {.lr = 0.1});
  optim::StepLR sched(sgd, /*step_size=*/3, /*gamma=*/0.5);
  expect_rates(rates(sgd, sched),
               {0.1,     0.1,      0.1,      0.05,     0.05,      0.05,      0.025,
                0.025,   0.025,    0.0125,   0.0125,   0.0125,    0.00625,   0.00625,
                0.00625, 0.003125, 0.003125, 0.003125, 0.0015625, 0.0015625, 0.0015625});
  EXPECT_EQ(sched.last_epoch(), 20);
  EXPECT_THROW(optim::StepLR(sgd, 0), tl::Error);
}

TEST(Scheduler, CosineAnnealingLRMatchesPyTorchPastTMax) {
  Tensor p = tl::zeros({1}).requires_grad_();
  optim::SGD sgd({p}, {.lr = 0.1});
  optim::CosineAnnealingLR sched(sgd, /*T_max=*/8, /*eta_min=*/0.001);
  expect_rates(rates(sgd, sched),
               {0.10000000000000001,   0.096232036859308701,  0.085501785668734107,
                0.069442829902071956,  0.050500000000000003,  0.031557170097928057,
                0.0154982143312659,    0.0047679631406913059, 0.001,
                0.0047679631406913068, 0.01549821433126591,   0.031557170097928071,
                0.050500000000000052,  0.06944282990207204,   0.08550178566873419,
                0.096232036859308784,  0.1000000000000001,    0.096232036859308798,
                0.085501785668734204,  0.069442829902072054,  0.050500000000000066});

  Tensor q = tl::zeros({1}).requires_grad_();
  optim::Adam adam({q}, {.lr = 0.05});
  optim::CosineAnnealingLR cos5(adam, 5);
  expect_rates(rates(adam, cos5), {0.050000000000000003,  0.04522542485937369,
                                   0.032725424859373686,  0.017274575140626316,
                                   0.0047745751406263167, 0,
                                   0.0047745751406263141, 0.017274575140626323,
                                   0.032725424859373707,  0.045225424859373718,
                                   0.050000000000000031,  0.045225424859373732,
                                   0.032725424859373714,  0.017274575140626334,
                                   0.0047745751406263219, 0,
                                   0.0047745751406263141, 0.017274575140626323,
                                   0.032725424859373714,  0.045225424859373732,
                                   0.050000000000000065});
}

// The rate the scheduler sets is the one the update uses.
TEST(Scheduler, StepUsesTheScheduledRate) {
  Tensor p = tl::zeros({1}, tl::kFloat64).requires_grad_();
  optim::SGD sgd({p}, {.lr = 1.0});
  optim::StepLR sched(sgd, 1, 0.5);
  double expected = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    p.mutable_grad() = tl::ones({1}, tl::kFloat64);
    sgd.step();
    expected -= std::pow(0.5, epoch);
    EXPECT_DOUBLE_EQ(p.item<double>(), expected);
    sched.step();
  }
}

}  // namespace
