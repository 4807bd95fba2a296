#include "tensorlib/autograd/node.h"

#include <execinfo.h>

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/memory_category.h"
#include "tensorlib/core/shape_util.h"

namespace tl::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};

}  // namespace

// Note [Autograd memory categories]
// A block holding a tensor saved for backward is an `activation` while saved; the gradient a
// leaf accumulates is a `gradient`. The profiler attributes the block's bytes accordingly, so
// a forward+backward trace shows activation memory rising in forward and falling as backward
// releases it. Only memory of no other category (or a temporary) becomes an activation when
// saved: a parameter, model input or optimizer state saved for backward keeps its category
// (as in PyTorch's memory profiler), and a saved tensor that outlives its node gets its
// category back. Parameters are tagged by nn::Module, optimizer state by the optimizers,
// input by the DataLoader (tl::set_memory_category).

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1)) {
  if (!is_anomaly_enabled()) return;
  // glibc's backtrace: tensorlib does not link the profiler's unwinder; names come from the
  // dynamic symbol table (link with -rdynamic for the program's own functions).
  void* frames[32];
  int n = ::backtrace(frames, 32);
  char** names = ::backtrace_symbols(frames, n);
  if (!names) return;
  for (int i = 1; i < n; ++i) creation_trace += std::string("  ") + names[i] + "\n";
  std::free(names);
}

SavedVariable::SavedVariable(const Tensor& t, bool is_output)
    : is_output_(is_output), saved_(true) {
  if (!t.defined()) return;
  TL_CHECK(!t.is_inference(),
           "Inference tensors cannot be saved for backward. To work around "
           "you can make a clone to get a normal tensor and use it in autograd.");
  version_ = t._version();
  requires_grad_ = is_output || t.requires_grad();  // an output gets its history after saving
  {
    AutoGradMode no_grad(false);
    data_ = t.detach();
  }
  const MemoryCategory before = memory_category(data_);
  if (before == MemoryCategory::unknown || before == MemoryCategory::temporary) {
    category_before_ = before;
    set_memory_category(data_, MemoryCategory::activation);
  }
  if (!requires_grad_ || is_output) {
    output_nr_ = t.output_nr();
    return;
  }
  output_nr_ = t.output_nr();
  if (t.grad_fn()) {
    grad_fn_ = t.grad_fn();
  } else {
    grad_accumulator_ = gradient_edge(t).fn;
  }
}

void SavedVariable::reset() {
  if (saved_) released_ = true;
  // Still alive elsewhere (a tensor the program kept): no longer an activation.
  if (category_before_ && data_.defined() && data_.storage().use_count() > 1)
    set_memory_category(data_, *category_before_);
  category_before_.reset();
  data_ = Tensor();
  grad_fn_.reset();
  grad_accumulator_.reset();
}

Tensor SavedVariable::unpack(const Node& node) const {
  TL_CHECK(!released_,
           "Trying to backward through the graph a second time (or directly access saved tensors "
           "after they have already been freed). Saved intermediate values of the graph are freed "
           "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
           "backward through the graph a second time or if you need to access saved tensors after "
           "calling backward.");
  if (!data_.defined()) return data_;
  if (data_._version() != version_) {
    TL_CHECK(false,
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [tl.",
             data_.dtype(), " ", data_.sizes(), "], which is output 0 of ", node.name(),
             ", is at version ", data_._version(), "; expected version ", version_, " instead.");
  }
  if (!requires_grad_) return data_;
  // Rebuild the tensor's place in the graph (Note [Saved tensors and cycles]).
  Tensor t;
  {
    AutoGradMode no_grad(false);
    t = data_.detach();
  }
  AutogradMeta* meta = t.impl()->ensure_autograd_meta();
  meta->requires_grad = true;
  meta->output_nr = output_nr_;
  if (is_output_) {
    meta->grad_fn = weak_grad_fn_.lock();
  } else if (grad_fn_) {
    meta->grad_fn = grad_fn_;
  } else {
    meta->grad_accumulator = grad_accumulator_;
  }
  return t;
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> v) : variable(std::move(v)) {}

namespace {
// Note [Stealing the gradient]. Stealable: grad mode off (no double backward), the variable's
// dtype, device, shape and dense layout, and no other owner -- `g` itself is the only reference to
// its TensorImpl, and its storage is reachable only through it (directly, or through a base only it
// holds) and holds nothing beyond it.
bool can_steal(const Tensor& g, const Tensor& var) {
  if (is_grad_enabled() || g.dtype() != var.dtype() || g.device() != var.device()) return false;
  if (g.sizes() != var.sizes() || !g.is_contiguous() || !var.is_contiguous()) return false;
  if (g.impl_ptr().use_count() != 1 || g.storage_offset() != 0) return false;
  if (g.nbytes() != g.storage()->nbytes()) return false;
  const std::shared_ptr<TensorImpl>& base = g.impl()->base();
  if (base && base.use_count() != 1) return false;
  return g.storage().use_count() == (base ? 2 : 1);
}
}  // namespace

variable_list AccumulateGrad::apply(variable_list&& grads) {
  auto impl = variable.lock();
  if (!impl || grads.empty() || !grads[0].defined()) return {};
  Tensor var(impl);
  AutogradMeta* meta = impl->autograd_meta();
  Tensor g = grads[0];
  for (auto& hook : meta->hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  if (!meta->grad.defined()) {
    // Note [Stealing the gradient]: as PyTorch's AccumulateGrad, a gradient nothing else can
    // reach becomes .grad as it is; otherwise .grad is a copy, so it never aliases a tensor of
    // the graph (with create_graph the copy is itself differentiable).
    grads.clear();
    meta->grad = can_steal(g, var)   ? g.detach()
                 : is_grad_enabled() ? g.clone()
                                     : g.detach().clone();
  } else if (is_grad_enabled()) {
    meta->grad = meta->grad + g;
  } else {
    meta->grad.add_(g);
  }
  set_memory_category(meta->grad, MemoryCategory::gradient);
  for (auto& hook : meta->post_accumulate_hooks) hook(var);
  return {};
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta* meta = t.impl()->autograd_meta();
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  auto acc = meta->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta->grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const Tensor& out, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta* meta = out.impl()->ensure_autograd_meta();
  meta->requires_grad = true;
  meta->grad_fn = fn;
  meta->output_nr = output_nr;
}

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (!grad.defined() || grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < grad.dim(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && grad.size(i) != 1)) dims.push_back(i);
  }
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return r.reshape(shape);
}

variable_list FunctionNode::apply(variable_list&& grads) {
  variable_list saved;
  saved.reserve(saved_.size());
  for (const auto& s : saved_) saved.push_back(s.unpack(*this));
  return fn_(grads, saved);
}

void FunctionNode::release_variables() {
  for (auto& s : saved_) s.reset();
  released_ = true;
}

void record(const Tensor& out, const char* op, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor>& save, BackwardFn fn) {
  bool any = false;
  for (const Tensor* t : inputs) any = any || (t->defined() && t->requires_grad());
  if (!any || !is_grad_enabled()) return;
  std::vector<SavedVariable> saved;
  std::vector<size_t> outputs;
  for (const Tensor& t : save) {
    bool is_output = t.defined() && t.is_same(out);
    if (is_output) outputs.push_back(saved.size());
    saved.emplace_back(t, is_output);
  }
  auto node = std::make_shared<FunctionNode>(op, std::move(saved), std::move(fn));
  for (size_t i : outputs) node->saved_variable(i).set_output_node(node);
  for (const Tensor* t : inputs) node->next_edges.push_back(gradient_edge(*t));
  set_history(out, node);
}

void check_inplace(const Tensor& self, const char* op) {
  if (!is_grad_enabled()) return;
  if (self.requires_grad()) {
    TL_CHECK(!self.is_leaf(), op,
             ": a leaf Variable that requires grad is being used in an "
             "in-place operation.");
  }
  if (self.is_view()) {
    const Tensor base = self._base();
    TL_CHECK(!(base.requires_grad() && base.is_leaf()), op,
             ": a view of a leaf Variable that "
             "requires grad is being used in an in-place operation.");
  }
}

// Note [In-place on a view]
// Writing into a view changes its base: the base's history becomes a CopySlices node whose
// backward sends the gradient of the view's region to the new value `r` and the rest to the
// base's old history (the region's old values were overwritten, so they get none).
void rebase_view_base(const Tensor& view, const Tensor& r) {
  Tensor base = view._base();
  if (!base.requires_grad() && !r.requires_grad()) return;
  std::vector<int64_t> vs = view.sizes().vec(), vst = view.strides().vec();
  std::vector<int64_t> bs = base.sizes().vec(), bst = base.strides().vec();
  const int64_t offset = view.storage_offset() - base.storage_offset();
  record(base, "CopySlices", {&base, &r}, {},
         [vs, vst, bs, bst, offset](const variable_list& g, const variable_list&) {
           Tensor grad_base = tl::empty_strided(bs, bst, g[0].options());
           grad_base.copy_(g[0]);
           Tensor region = grad_base.as_strided(vs, vst, offset);
           Tensor grad_r = region.clone();
           region.zero_();
           return variable_list{grad_base, grad_r};
         });
}

}  // namespace tl::autograd
