// Learning-rate schedulers with PyTorch's values (torch.optim.lr_scheduler): construct after
// the optimizer, call step() after each optimizer.step() (once per epoch for epoch-based
// schedules). tensorlib optimizers have one learning rate (no parameter groups), so
// get_last_lr() returns a list of one, as PyTorch's would for one group.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorlib/optim/optimizer.h"

namespace tl::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // Advances one epoch and sets the optimizer's learning rate for it.
  void step();
  std::vector<double> get_last_lr() const { return {last_lr_}; }
  int64_t last_epoch() const { return last_epoch_; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // The learning rate at `epoch` (closed form; the base rate is the optimizer's at
  // construction).
  virtual double lr_at(int64_t epoch) const = 0;
  // Called by the derived constructor once its parameters are set: epoch 0's rate.
  void initialize();

  Optimizer& optimizer_;
  double base_lr_;

 private:
  int64_t last_epoch_ = 0;
  double last_lr_;
};

// lr = base_lr * gamma^(epoch / step_size), integer division.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2; past T_max the cosine
// continues (the rate rises again), as PyTorch's.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace tl::optim
