// Activation checkpointing (torch.utils.checkpoint): run a function without keeping its
// intermediate activations, and recompute them during backward.
#pragma once

#include <functional>
#include <vector>

#include "tensorlib/core/tensor.h"

namespace tl {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Calls fn(inputs) without recording a graph; the outputs get one node whose backward
// recomputes fn with grad enabled and backpropagates through that. fn must be deterministic
// (seed any randomness itself).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input);

}  // namespace tl
