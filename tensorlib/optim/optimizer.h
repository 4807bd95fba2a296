// tl::optim: SGD, Adam and AdamW with PyTorch's update rules and defaults. Optimizer state
// tensors are announced as `optimizer_state` to the profiler.
#pragma once

#include <map>
#include <vector>

#include "tensorlib/core/tensor.h"

namespace tl::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient (under no_grad).
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

 protected:
  // A zero state tensor for `p`, announced as optimizer_state.
  Tensor new_state(const Tensor& p);
  std::vector<Tensor> params_;
  double lr_ = 0;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;

 private:
  SGDOptions o_;
  std::vector<Tensor> momentum_;  // the buffer per parameter (undefined until first use)
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled (default 1e-2)
  // One pass per parameter through the backend's fused kernel where it has one (Note [Fused
  // Adam]: the same result to the bit); false composes the update from ops.
  bool fused = true;
  // Without the fused kernel: PyTorch's multi-tensor (foreach) step, each op over every
  // parameter before the next, so its denominators are live for all parameters at once (one
  // parameter-sized temporary in all, Note [Foreach Adam]); false: one parameter at a time.
  bool foreach = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  void step() override;

 private:
  // Note [Foreach Adam]: the composed update, op by op over all parameters.
  void multi_tensor_step(double bc1, double bc2);
  AdamOptions o_;
  bool decoupled_;
  int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {1e-3, 0.9, 0.999, 1e-8, 1e-2})
      : Adam(std::move(params), options, /*decoupled_weight_decay=*/true) {}
};

}  // namespace tl::optim
