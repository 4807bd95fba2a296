// Shape arithmetic shared by views and ops (internal to tensorlib).
#pragma once

#include <optional>
#include <vector>

#include "tensorlib/core/array_ref.h"

namespace tl::detail {

// Wraps a possibly negative dim into [0, ndim); IndexError naming the valid range otherwise.
// A 0-dim tensor accepts dims -1 and 0 (as PyTorch).
int64_t wrap_dim(int64_t dim, int64_t ndim);
std::vector<int64_t> contiguous_strides(IntArrayRef sizes);
int64_t numel_of(IntArrayRef sizes);
// Resolves one -1 in `shape` against numel; errors as PyTorch ("shape '[2, 5]' is invalid
// for input of size 6").
std::vector<int64_t> infer_size(IntArrayRef shape, int64_t numel);
// The strides a view of (sizes, strides) with `new_sizes` would have, or nullopt when the
// memory layout makes a view impossible (then reshape copies): Note [View strides].
std::optional<std::vector<int64_t>> view_strides(IntArrayRef sizes, IntArrayRef strides,
                                                 IntArrayRef new_sizes);
// True when `dims` (wrapped) name each dim at most once; returns the mask of reduced dims.
// Empty `dims` means all dims.
std::vector<bool> dim_mask(IntArrayRef dims, int64_t ndim, const char* op);

}  // namespace tl::detail
