// The Tensor methods of autograd: requires_grad, grad, backward, hooks.
#include "tensorlib/autograd/engine.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/autograd/node.h"

namespace tl {

using autograd::AutogradMeta;

AutogradMeta* TensorImpl::ensure_autograd_meta() {
  if (!autograd_meta_) autograd_meta_ = std::make_unique<AutogradMeta>();
  return autograd_meta_.get();
}

bool Tensor::requires_grad() const {
  const AutogradMeta* m = impl()->autograd_meta();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool r) {
  TL_CHECK(is_leaf() || r,
           "you can only change requires_grad flags of leaf variables. If you want "
           "to use a computed variable in a subgraph that doesn't require differentiation use "
           "var_no_grad = var.detach().");
  TL_CHECK(!r || is_floating_point(), "only Tensors of floating point dtype can require gradients");
  TL_CHECK(!r || !is_inference() || autograd::is_inference_mode_enabled(),
           "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  if (!r && !impl()->autograd_meta()) return *this;
  impl()->ensure_autograd_meta()->requires_grad = r;
  return *this;
}

Tensor& Tensor::detach_() {
  TL_CHECK(!is_view(), "Can't detach views in-place. Use detach() instead.");
  if (AutogradMeta* m = impl()->autograd_meta()) {
    m->grad_fn.reset();
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* m = impl()->autograd_meta();
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() {
  return impl()->ensure_autograd_meta()->grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const AutogradMeta* m = impl()->autograd_meta();
  return m ? m->grad_fn : nullptr;
}

bool Tensor::is_leaf() const {
  return grad_fn() == nullptr;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* m = impl()->autograd_meta();
  return m ? m->output_nr : 0;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

void Tensor::retain_grad() const {
  TL_CHECK(requires_grad(), "can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta* m = impl()->autograd_meta();
  if (m->retains_grad) return;
  m->retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  m->grad_fn->pre_hooks.emplace_back(m->output_nr, [weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      AutogradMeta* meta = impl->ensure_autograd_meta();
      meta->grad = meta->grad.defined() ? meta->grad + g : g.detach().clone();
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = impl()->autograd_meta();
  return m && m->retains_grad;
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TL_CHECK(requires_grad(), "cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta* m = impl()->autograd_meta();
  if (m->grad_fn) {
    m->grad_fn->pre_hooks.emplace_back(m->output_nr, std::move(hook));
  } else {
    m->hooks.push_back(std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  TL_CHECK(is_leaf() && requires_grad(),
           "post accumulate grad hooks cannot be registered on "
           "non-leaf tensors");
  impl()->autograd_meta()->post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace tl
