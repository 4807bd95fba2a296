#include "tensorlib/autograd/custom_function.h"

#include "tensorlib/autograd/function.h"

namespace tl::autograd {

variable_list AutogradContext::get_saved_variables() const {
  variable_list out;
  for (const auto& s : saved_) out.push_back(s.unpack(*node_));
  return out;
}

void CustomNodeBase::finish(const std::shared_ptr<Node>& self,
                            const std::vector<Tensor*>& outputs) {
  for (const Tensor& t : ctx.to_save_) {
    bool is_output = false;
    for (const Tensor* o : outputs) is_output = is_output || (t.defined() && t.is_same(*o));
    ctx.saved_.emplace_back(t, is_output);
    if (is_output) ctx.saved_.back().set_output_node(self);
  }
  ctx.to_save_.clear();
  num_outputs = static_cast<uint32_t>(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& o = *outputs[i];
    bool skip = !o.defined() || !o.is_floating_point();
    for (const Tensor& n : ctx.non_differentiable_) skip = skip || n.is_same(o);
    bool dirty = false;
    for (const Tensor& d : ctx.dirty_) dirty = dirty || d.is_same(o);
    if (dirty) check_inplace(o, "a custom function's mark_dirty input");
    if (!skip) set_history(o, self, static_cast<uint32_t>(i));
  }
}

}  // namespace tl::autograd
