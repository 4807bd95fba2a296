// Note [Backward order]
// As PyTorch's engine: count, for every node reachable from the outputs, how many edges lead
// into it; a node runs once all of them have delivered their gradient (summed in its input
// buffer). Among ready nodes the most recently created runs first (highest sequence_nr), so
// backward walks forward's order in reverse and frees saved tensors as early as possible.
#include "tensorlib/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "tensorlib/autograd/grad_mode.h"

namespace tl::autograd {

namespace {

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

struct Capture {
  Node* fn;
  uint32_t input_nr;
  size_t slot;
};

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? slot + g : g;
}

// Runs the graph. With `captures`, the gradients flowing into those (node, input) pairs are
// returned instead of running AccumulateGrad nodes (autograd::grad).
variable_list run_backward(const variable_list& outputs, const variable_list& grad_outputs,
                           bool retain_graph, bool create_graph,
                           const std::vector<Edge>& capture_edges) {
  TL_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
           "grad_tensors should have the same length as tensors: got ", grad_outputs.size(),
           " and ", outputs.size());
  std::vector<Edge> roots;
  variable_list root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TL_CHECK(out.defined() && out.requires_grad(),
             "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      TL_CHECK(out.numel() == 1, "grad can be implicitly created only for scalar outputs");
      g = tl::ones_like(out);
    } else {
      TL_CHECK(g.sizes() == out.sizes(), "Mismatch in shape: grad_output[", i, "] has a shape of ",
               g.sizes(), " and output[", i, "] has a shape of ", out.sizes(), ".");
    }
    roots.push_back(gradient_edge(out));
    root_grads.push_back(g);
  }

  // Dependencies: edges into each node from the reachable graph.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : roots) {
    if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      deps[e.fn.get()]++;
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }

  std::vector<Capture> captures;
  for (size_t i = 0; i < capture_edges.size(); ++i)
    if (capture_edges[i].valid())
      captures.push_back({capture_edges[i].fn.get(), capture_edges[i].input_nr, i});
  variable_list captured(capture_edges.size());

  std::unordered_map<Node*, variable_list> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep;  // holds nodes alive while queued
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].fn.get();
    auto& buf = buffers[n];
    buf.resize(std::max<size_t>(buf.size(), n->num_outputs));
    accumulate(buf[roots[i].input_nr], root_grads[i]);
    keep[n] = roots[i].fn;
  }
  for (const Edge& e : roots) {
    if (deps[e.fn.get()] == 0) {
      ready.push(e.fn.get());
      deps[e.fn.get()] = -1;  // queued
    }
  }

  AutoGradMode mode(create_graph);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    variable_list inputs = std::move(buffers[n]);
    buffers.erase(n);
    for (auto& [nr, hook] : n->pre_hooks) {
      if (nr < inputs.size() && inputs[nr].defined()) {
        Tensor r = hook(inputs[nr]);
        if (r.defined()) inputs[nr] = r;
      }
    }
    for (const Capture& c : captures)
      if (c.fn == n && c.input_nr < inputs.size()) accumulate(captured[c.slot], inputs[c.input_nr]);
    bool is_accumulate = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    variable_list outs;
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.defined();
    if (any && !(is_accumulate && !capture_edges.empty())) {
      outs = n->apply(std::move(inputs));
      if (!retain_graph) n->release_variables();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      Node* next = e.fn.get();
      auto& buf = buffers[next];
      buf.resize(std::max<size_t>(buf.size(), next->num_outputs));
      if (i < outs.size()) accumulate(buf[e.input_nr], outs[i]);
      keep[next] = e.fn;
      if (--deps[next] == 0) {
        ready.push(next);
        deps[next] = -1;
      }
    }
    keep.erase(n);
  }
  return captured;
}

}  // namespace

void backward(const variable_list& outputs, const variable_list& grad_outputs, bool retain_graph,
              bool create_graph) {
  run_backward(outputs, grad_outputs, retain_graph || create_graph, create_graph, {});
}

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, std::optional<bool> retain_graph,
                   bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TL_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "One of the differentiated Tensors "
             "does not require grad (input ", i, ")");
    edges.push_back(gradient_edge(inputs[i]));
  }
  variable_list result = run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph),
                                      create_graph, edges);
  for (size_t i = 0; i < result.size(); ++i) {
    TL_CHECK(result[i].defined() || allow_unused,
             "One of the differentiated Tensors appears to not have been used in the graph. Set "
             "allow_unused=True if this is the desired behavior.");
  }
  return result;
}

}  // namespace tl::autograd
