#include "tensorlib/autograd/checkpoint.h"

#include "tensorlib/autograd/engine.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/autograd/node.h"

namespace tl {

namespace {

struct CheckpointNode final : autograd::Node {
  CheckpointNode(CheckpointFn f, const std::vector<Tensor>& in) : fn(std::move(f)) {
    for (const Tensor& t : in) inputs.emplace_back(t, /*is_output=*/false);
  }

  autograd::variable_list apply(autograd::variable_list&& grads) override {
    // Recompute forward from detached copies of the inputs, with grad enabled, then
    // backpropagate the incoming gradients through the recomputed graph.
    std::vector<Tensor> detached;
    for (const auto& s : inputs) {
      Tensor t = s.unpack(*this);
      Tensor d = t.detach();
      if (t.requires_grad()) d.requires_grad_();
      detached.push_back(d);
    }
    EnableGradGuard enable;
    std::vector<Tensor> outs = fn(detached);
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < outs.size() && i < grads.size(); ++i) {
      if (grads[i].defined() && outs[i].requires_grad()) {
        roots.push_back(outs[i]);
        root_grads.push_back(grads[i]);
      }
    }
    // backward (not grad): tensors fn captured, such as a layer's weights, accumulate their
    // gradients as they would without checkpointing; the inputs' come back through `detached`.
    if (!roots.empty()) autograd::backward(roots, root_grads);
    autograd::variable_list result;
    for (const Tensor& d : detached) result.push_back(d.requires_grad() ? d.grad() : Tensor());
    return result;
  }
  std::string name() const override { return "CheckpointBackward"; }
  void release_variables() override {
    for (auto& s : inputs) s.reset();
  }

  CheckpointFn fn;
  std::vector<autograd::SavedVariable> inputs;
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;  // no graph, so no saved activations
    outs = fn(inputs);
  }
  // With grad mode on, the outputs get the node even when no input requires grad: fn may use
  // tensors it captured (parameters), which get their gradients when backward recomputes it.
  if (!is_grad_enabled()) return outs;
  auto node = std::make_shared<CheckpointNode>(fn, inputs);
  node->num_outputs = static_cast<uint32_t>(outs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(autograd::gradient_edge(t));
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].is_floating_point()) autograd::set_history(outs[i], node, static_cast<uint32_t>(i));
  return outs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input) {
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                    std::vector<Tensor>{input})[0];
}

}  // namespace tl
