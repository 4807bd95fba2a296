// The autograd graph: nodes (one per differentiable op application) joined by edges to the
// nodes that produced their inputs; leaves end in AccumulateGrad.
//
// Note [Saved tensors]
// A node keeps what its backward needs as SavedVariables. Each remembers the tensor's version
// when saved; unpacking a tensor modified in place since raises PyTorch's error. Without
// retain_graph, backward releases a node's saved tensors right after running it, so their
// memory goes back to the allocator as backward proceeds; a second backward then raises
// "Trying to backward through the graph a second time".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorlib/core/tensor.h"

namespace tl::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: the input does not need a gradient
  uint32_t input_nr = 0;     // which input of `fn` this gradient feeds
  bool valid() const { return fn != nullptr; }
};

using variable_list = std::vector<Tensor>;

struct Node : std::enable_shared_from_this<Node> {
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients w.r.t. this node's inputs (one per next edge) from the gradients w.r.t. its
  // outputs. Undefined tensors mean zero.
  virtual variable_list apply(variable_list&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors (Note [Saved tensors]).
  virtual void release_variables() {}

  std::vector<Edge> next_edges;
  uint64_t sequence_nr;  // creation order: later nodes run first in backward
  uint32_t num_outputs = 1;
  // Hooks on the gradient of output `first` before this node runs (a non-leaf tensor's
  // register_hook and retain_grad).
  std::vector<std::pair<uint32_t, std::function<Tensor(const Tensor&)>>> pre_hooks;
  // In anomaly mode: where forward created this node (symbolized native frames).
  std::string creation_trace;
};

// Saves a tensor for backward, with the version check of Note [Saved tensors].
//
// Note [Saved tensors and cycles]
// The saved tensor is kept as a detached alias (same storage and version counter) plus what
// is needed to rebuild its place in the graph on unpack: for an input, its grad_fn (or a
// leaf's accumulator) held strongly; for the node's own output, a weak reference to the node.
// Holding the tensor itself would make a cycle whenever it later becomes the output of the
// node that saved it (an in-place op, or a saved output).
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  // The output's node, once it exists (record() sets it).
  void set_output_node(const std::shared_ptr<Node>& node) { weak_grad_fn_ = node; }
  // The saved tensor; throws tl::Error when it was modified in place or already released.
  // `node` names the node in the message.
  Tensor unpack(const Node& node) const;
  void reset();
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  std::shared_ptr<Node> grad_fn_;
  std::weak_ptr<Node> weak_grad_fn_;
  std::shared_ptr<Node> grad_accumulator_;
  uint32_t output_nr_ = 0;
  uint32_t version_ = 0;
  bool requires_grad_ = false;
  bool is_output_ = false;
  bool saved_ = false;
  bool released_ = false;
  // The storage's category before it was saved, restored when released while still alive
  // (Note [Autograd memory categories]); set only when saving made it an activation.
  std::optional<tidemark::events::Category> category_before_;
};

// The end of a leaf's edges: adds incoming gradients into the leaf's .grad().
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> variable);
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::weak_ptr<TensorImpl> variable;
};

using Hook = std::function<Tensor(const Tensor&)>;

// Per-tensor autograd state (null in tensors that never required a gradient).
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  std::weak_ptr<Node> grad_accumulator;
  uint32_t output_nr = 0;
  bool retains_grad = false;
  std::vector<Hook> hooks;
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
};

// ---- Recording helpers for op implementations ---------------------------------------------

// True when grad mode is on and any of the tensors requires a gradient.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
// The edge a gradient for `t` flows into: its grad_fn, or its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// Makes `out` the `output_nr`th output of `fn` (requires_grad, grad_fn).
void set_history(const Tensor& out, const std::shared_ptr<Node>& fn, uint32_t output_nr = 0);
// Sums `grad` down to `shape` (undoing broadcasting).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace tl::autograd
