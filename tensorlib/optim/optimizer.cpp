#include "tensorlib/optim/optimizer.h"

#include <cmath>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/memory_category.h"

namespace tl::optim {

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (set_to_none)
      p.mutable_grad() = Tensor();
    else if (p.grad().defined())
      p.mutable_grad().zero_();
  }
}

Tensor Optimizer::new_state(const Tensor& p) {
  Tensor s = tl::zeros_like(p);
  set_memory_category(s, MemoryCategory::optimizer_state);
  return s;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), o_(o) {
  TL_CHECK(o.lr >= 0, "SGD: invalid learning rate ", o.lr);
  TL_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "SGD: Nesterov momentum requires a momentum and zero dampening");
  lr_ = o.lr;
  momentum_.resize(params_.size());
}

// PyTorch's SGD: g += wd * p; buf = g (first step) or momentum * buf + (1 - dampening) * g;
// g = g + momentum * buf (nesterov) or buf; p -= lr * g.
void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (o_.weight_decay != 0) g = g + p * o_.weight_decay;
    if (o_.momentum != 0) {
      if (!momentum_[i].defined()) {
        momentum_[i] = new_state(p);
        momentum_[i].copy_(g);
      } else {
        momentum_[i].mul_(o_.momentum).add_(g, 1 - o_.dampening);
      }
      g = o_.nesterov ? g + momentum_[i] * o_.momentum : momentum_[i];
    }
    p.sub_(g, lr_);
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params)), o_(o), decoupled_(decoupled) {
  TL_CHECK(o.lr >= 0, "Adam: invalid learning rate ", o.lr);
  TL_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "Adam: invalid betas (",
           o.beta1, ", ", o.beta2, ")");
  lr_ = o.lr;
  m_.resize(params_.size());
  v_.resize(params_.size());
}

// PyTorch's Adam/AdamW: (AdamW) p *= 1 - lr * wd; (Adam) g += wd * p;
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
//
// Note [Fused Adam]
// ~~~~~~~~~~~~~~~~~
// Composed from ops, the update makes ten passes over each parameter and four temporaries; on
// the CPU it was half of the MLP's training step (docs/performance.md). A backend with a fused
// kernel (Kernels::adam_step, the CPU's in tensorlib/cpu/optim.cpp) makes one pass, reading p, g, m
// and v once, with the same arithmetic in the same order and precision, so the result is the
// composed update's to the bit (a test holds the two paths equal). The composed ops remain for what
// the kernel declines (half and bfloat16 parameters, non-contiguous or overlapping tensors, a
// backend without one). Either way p, m and v each count one in-place write (their version
// counters).
void Adam::step() {
  NoGradGuard no_grad;
  ++t_;
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(t_));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(t_));
  if (!o_.fused && o_.foreach) return multi_tensor_step(bc1, bc2);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (!m_[i].defined()) {
      m_[i] = new_state(p);
      v_[i] = new_state(p);
    }
    const detail::AdamStep fused{o_.beta1, o_.beta2,        lr_ / bc1,  std::sqrt(bc2),
                                 o_.eps,   o_.weight_decay, decoupled_, lr_};
    if (o_.fused && detail::check_device("adam", {&p, &g, &m_[i], &v_[i]}) == p.device() &&
        detail::kernels_for(p.device()).adam_step(fused, p, g, m_[i], v_[i])) {
      p.bump_version();
      m_[i].bump_version();
      v_[i].bump_version();
      continue;
    }
    if (o_.weight_decay != 0) {
      if (decoupled_)
        p.mul_(1 - lr_ * o_.weight_decay);
      else
        g = g + p * o_.weight_decay;
    }
    m_[i].mul_(o_.beta1).add_(g, 1 - o_.beta1);
    v_[i].mul_(o_.beta2).add_(g * g, 1 - o_.beta2);
    Tensor denom = (v_[i].sqrt() / std::sqrt(bc2)).add_(o_.eps);
    p.sub_(m_[i] / denom, lr_ / bc1);
  }
}

// Note [Foreach Adam]
// ~~~~~~~~~~~~~~~~~~~
// PyTorch's default Adam on CUDA without `fused` is `_multi_tensor_adam`: each op runs over the
// list of every parameter (torch._foreach_*) before the next starts, in few kernel launches.
// The moments are updated in place, but `exp_avg_sq.sqrt() / sqrt(bc2) + eps` is a new tensor
// per parameter, all alive until the last parameter's update: a parameter-sized temporary on
// top of the parameters, their gradients and both moments -- the step that sets the peak of
// many training runs (the `optimizer-peak` finding). The same arithmetic as the composed
// update, so the same result to the bit.
void Adam::multi_tensor_step(double bc1, double bc2) {
  std::vector<size_t> with_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) with_grad.push_back(i);
  std::vector<Tensor> grads;
  for (size_t i : with_grad) {
    Tensor& p = params_[i];
    if (!m_[i].defined()) {
      m_[i] = new_state(p);
      v_[i] = new_state(p);
    }
    Tensor g = p.grad();
    if (o_.weight_decay != 0) {
      if (decoupled_)
        p.mul_(1 - lr_ * o_.weight_decay);
      else
        g = g + p * o_.weight_decay;
    }
    grads.push_back(g);
  }
  for (size_t k = 0; k < with_grad.size(); ++k)
    m_[with_grad[k]].mul_(o_.beta1).add_(grads[k], 1 - o_.beta1);
  for (size_t k = 0; k < with_grad.size(); ++k)
    v_[with_grad[k]].mul_(o_.beta2).add_(grads[k] * grads[k], 1 - o_.beta2);
  std::vector<Tensor> denoms;  // live for every parameter at once
  for (size_t i : with_grad) denoms.push_back((v_[i].sqrt() / std::sqrt(bc2)).add_(o_.eps));
  for (size_t k = 0; k < with_grad.size(); ++k) {
    const size_t i = with_grad[k];
    params_[i].sub_(m_[i] / denoms[k], lr_ / bc1);
  }
}

}  // namespace tl::optim
