// Recording a differentiable op: a node whose backward is a function of the output gradient
// and the tensors saved in forward (internal to tensorlib's op implementations).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/autograd/node.h"

namespace tl::autograd {

// grads: gradients of the op's outputs (one); saved: the unpacked saved tensors, in order.
// Returns one gradient per input (undefined where none flows).
using BackwardFn =
    std::function<variable_list(const variable_list& grads, const variable_list& saved)>;

struct FunctionNode final : Node {
  FunctionNode(std::string op, std::vector<SavedVariable> saved, BackwardFn fn)
      : op_(std::move(op)), saved_(std::move(saved)), fn_(std::move(fn)) {}
  variable_list apply(variable_list&& grads) override;
  // PyTorch's spelling: "SqrtBackward0".
  std::string name() const override {
    std::string n = op_ + "Backward0";
    if (!n.empty() && n[0] >= 'a' && n[0] <= 'z') n[0] = static_cast<char>(n[0] - 'a' + 'A');
    return n;
  }
  void release_variables() override;
  SavedVariable& saved_variable(size_t i) { return saved_[i]; }

 private:
  std::string op_;
  std::vector<SavedVariable> saved_;
  BackwardFn fn_;
  bool released_ = false;
};

// Makes `out` the result of a differentiable op over `inputs` when any needs a gradient:
// its backward is `fn`, called with the tensors in `save` (checked for in-place changes).
void record(const Tensor& out, const char* op, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor>& save, BackwardFn fn);

// Runs an op's forward without recording what it does internally (the op records itself).
template <typename F>
auto forward_no_grad(F f) {
  AutoGradMode no_grad(false);
  return f();
}

// For an in-place op on `self` that needs a gradient: computes `self`'s new value out of
// place with `compute` (recording the graph), writes it into `self`, and moves `self`'s
// history to the new node. A leaf that requires grad cannot be modified in place.
void check_inplace(const Tensor& self, const char* op);

// After an in-place write of `r` into the view `view`, makes the view's base a CopySlices
// result (Note [In-place on a view]).
void rebase_view_base(const Tensor& view, const Tensor& r);

}  // namespace tl::autograd
