// Custom differentiable functions in libtorch's style:
//
//   struct Scale : tl::autograd::Function<Scale> {
//     static tl::Tensor forward(tl::autograd::AutogradContext* ctx, tl::Tensor x, double k) {
//       ctx->saved_data["k"] = k;
//       return x * k;
//     }
//     static tl::autograd::variable_list backward(tl::autograd::AutogradContext* ctx,
//                                                 tl::autograd::variable_list grads) {
//       double k = std::any_cast<double>(ctx->saved_data["k"]);
//       return {grads[0] * k, tl::Tensor()};  // one entry per forward argument
//     }
//   };
//   tl::Tensor y = Scale::apply(x, 2.0);
#pragma once

#include <any>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/autograd/node.h"

namespace tl::autograd {

class AutogradContext {
 public:
  // Tensors backward needs; checked for in-place changes like any saved tensor.
  void save_for_backward(variable_list to_save) { to_save_ = std::move(to_save); }
  variable_list get_saved_variables() const;
  // Inputs forward modified in place (their history moves to this function).
  void mark_dirty(const variable_list& inputs) { dirty_ = inputs; }
  // Outputs that get no gradient (indices, masks).
  void mark_non_differentiable(const variable_list& outputs) { non_differentiable_ = outputs; }
  // Whether the i-th forward argument needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }

  std::map<std::string, std::any> saved_data;

 private:
  template <class T>
  friend struct Function;
  friend struct CustomNodeBase;
  variable_list to_save_;
  std::vector<SavedVariable> saved_;
  variable_list dirty_, non_differentiable_;
  std::vector<bool> needs_;
  const Node* node_ = nullptr;
};

struct CustomNodeBase : Node {
  AutogradContext ctx;
  size_t num_args = 0;
  void release_variables() override {
    for (auto& s : ctx.saved_) s.reset();
  }
  // Saves ctx's tensors and attaches `outputs` to this node.
  void finish(const std::shared_ptr<Node>& self, const std::vector<Tensor*>& outputs);
};

template <class T>
struct CustomNode final : CustomNodeBase {
  variable_list apply(variable_list&& grads) override {
    variable_list result = T::backward(&ctx, std::move(grads));
    TL_CHECK(result.size() == num_args, "function ", name(),
             " returned an incorrect number of "
             "gradients (expected ",
             num_args, ", got ", result.size(), ")");
    return result;
  }
  std::string name() const override { return "CustomFunctionBackward"; }
};

template <class T>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    auto node = std::make_shared<CustomNode<T>>();
    node->ctx.node_ = node.get();
    node->num_args = sizeof...(Args);
    bool any = false;
    auto visit = [&](const auto& a) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) {
        bool need = a.defined() && a.requires_grad();
        any = any || need;
        node->ctx.needs_.push_back(need);
        node->next_edges.push_back(gradient_edge(a));
      } else {
        node->ctx.needs_.push_back(false);
        node->next_edges.emplace_back();
      }
    };
    (visit(args), ...);
    any = any && is_grad_enabled();
    auto outputs = [&] {
      AutoGradMode no_grad(false);
      return T::forward(&node->ctx, std::forward<Args>(args)...);
    }();
    if (!any) return outputs;
    std::vector<Tensor*> outs;
    if constexpr (std::is_same_v<decltype(outputs), Tensor>) {
      outs.push_back(&outputs);
    } else {
      for (auto& o : outputs) outs.push_back(&o);
    }
    node->finish(node, outs);
    return outputs;
  }
};

}  // namespace tl::autograd
