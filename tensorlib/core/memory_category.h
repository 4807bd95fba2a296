// What a tensor's memory holds, as the profiler sees it (a `category` event,
// profiler/events/events.h).
#pragma once

#include "profiler/events/events.h"

namespace tl {

class Tensor;

using MemoryCategory = tidemark::events::Category;

/// Tells the profiler that the block holding `t`'s storage is a parameter, a gradient,
/// optimizer state, an activation, model input or a temporary (as PyTorch's memory profiler
/// categorises memory). The block keeps the category until it is freed or categorised again.
/// tensorlib tags its own tensors: nn parameters, leaf gradients, tensors saved for backward,
/// optimizer state and DataLoader batches. No-op without a sink or when `t` has no memory.
void set_memory_category(const Tensor& t, MemoryCategory category);

/// The category last set for `t`'s storage (`unknown` if none, or `t` is undefined).
MemoryCategory memory_category(const Tensor& t);

}  // namespace tl
