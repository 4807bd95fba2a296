// Note [Backward order]
// As PyTorch's engine: count, for every node reachable from the outputs, how many edges lead
// into it; a node runs once all of them have delivered their gradient (summed in its input
// buffer). Among ready nodes the most recently created runs first (highest sequence_nr), so
// backward walks forward's order in reverse and frees saved tensors as early as possible.
#include "tensorlib/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "profiler/events/annotate.h"
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

// Anomaly mode: a NaN in a node's gradients names the node and where forward created it.
void check_anomaly(const Node& n, const variable_list& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& g = outs[i];
    if (!g.defined() || !g.is_floating_point()) continue;
    AutoGradMode no_grad(false);
    if (g.ne(g).to(kInt64).sum().item<int64_t>() == 0) continue;
    TL_CHECK(false, "Function '", n.name(), "' returned nan values in its ", i, "th output.",
             n.creation_trace.empty()
                 ? std::string()
                 : "\nTraceback of forward call that caused the error:\n" + n.creation_trace);
  }
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? slot + g : g;
}

// Runs the graph. With `captures`, the gradients flowing into those (node, input) pairs are
// returned instead of running AccumulateGrad nodes (autograd::grad).
variable_list run_backward(const variable_list& outputs, const variable_list& grad_outputs,
                           bool retain_graph, bool create_graph,
                           const std::vector<Edge>& capture_edges) {
  // A scope named "backward" (retain_graph: "backward(retain_graph)") around the engine's
  // work, so traces show where backward ran and the diagnoses can tell a training step from
  // evaluation (docs/diagnoses.md).
  tidemark::events::Scope scope(retain_graph ? "backward(retain_graph)" : "backward");
  TL_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
           "grad_tensors should have the same length as tensors: got ", grad_outputs.size(),
           " and ", outputs.size());
  std::vector<Edge> roots;
  variable_list root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TL_CHECK(out.defined() && out.requires_grad(), "element ", i,
             " of tensors does not require grad and does not have a grad_fn");
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

  // Per reachable node: edges still to deliver, the summed input gradients, and a strong
  // reference while it waits (the graph may be owned only by the outputs' grad_fn chain).
  struct NodeTask {
    int deps = 0;
    bool queued = false;
    variable_list buffer;
    std::shared_ptr<Node> keep;
  };
  std::unordered_map<Node*, NodeTask> tasks;
  tasks.reserve(1024);
  std::vector<Node*> stack;
  for (const Edge& e : roots) {
    auto [it, fresh] = tasks.try_emplace(e.fn.get());
    if (fresh) {
      it->second.keep = e.fn;
      stack.push_back(e.fn.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      auto [it, fresh] = tasks.try_emplace(e.fn.get());
      it->second.deps++;
      if (fresh) stack.push_back(e.fn.get());
    }
  }

  std::vector<Capture> captures;
  for (size_t i = 0; i < capture_edges.size(); ++i)
    if (capture_edges[i].valid())
      captures.push_back({capture_edges[i].fn.get(), capture_edges[i].input_nr, i});
  variable_list captured(capture_edges.size());

  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    NodeTask& t = tasks[roots[i].fn.get()];
    t.buffer.resize(std::max<size_t>(t.buffer.size(), roots[i].fn->num_outputs));
    accumulate(t.buffer[roots[i].input_nr], root_grads[i]);
  }
  for (const Edge& e : roots) {
    NodeTask& t = tasks[e.fn.get()];
    if (t.deps == 0 && !t.queued) {
      ready.push(e.fn.get());
      t.queued = true;
    }
  }

  AutoGradMode mode(create_graph);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    auto task_it = tasks.find(n);
    variable_list inputs = std::move(task_it->second.buffer);
    std::shared_ptr<Node> keep = std::move(task_it->second.keep);
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
      if (is_anomaly_enabled()) check_anomaly(*n, outs);
      if (!retain_graph) n->release_variables();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      NodeTask& t = tasks[e.fn.get()];
      t.buffer.resize(std::max<size_t>(t.buffer.size(), e.fn->num_outputs));
      if (i < outs.size()) accumulate(t.buffer[e.input_nr], outs[i]);
      if (!t.keep) t.keep = e.fn;
      if (--t.deps == 0 && !t.queued) {
        ready.push(e.fn.get());
        t.queued = true;
      }
    }
    tasks.erase(task_it);
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
    TL_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
             "One of the differentiated Tensors "
             "does not require grad (input ",
             i, ")");
    edges.push_back(gradient_edge(inputs[i]));
  }
  variable_list result =
      run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, edges);
  for (size_t i = 0; i < result.size(); ++i) {
    TL_CHECK(result[i].defined() || allow_unused,
             "One of the differentiated Tensors appears to not have been used in the graph. Set "
             "allow_unused=True if this is the desired behavior.");
  }
  return result;
}

}  // namespace tl::autograd
