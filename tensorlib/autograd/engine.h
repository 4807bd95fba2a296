// The backward engine: runs the graph's nodes in dependency order from the outputs.
#pragma once

#include <optional>
#include <vector>

#include "tensorlib/autograd/node.h"

namespace tl::autograd {

// Backpropagates `grad_outputs` (undefined: ones, for scalar outputs) from `outputs` and
// accumulates into the leaves' .grad().
void backward(const variable_list& outputs, const variable_list& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

// The gradients of `outputs` w.r.t. `inputs`, without touching any .grad(), as
// torch.autograd.grad. An input the outputs do not depend on raises an error unless
// `allow_unused`, which gives an undefined tensor for it. `retain_graph` defaults to
// `create_graph`.
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {},
                   std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                   bool allow_unused = false);

}  // namespace tl::autograd
