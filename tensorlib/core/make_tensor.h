// Constructors of TensorImpls used by factories, views and ops (internal to tensorlib).
#pragma once

#include "tensorlib/core/tensor.h"

namespace tl::detail {

// A new tensor on its own storage (contiguous), tagged with the op that made it.
Tensor make_tensor(IntArrayRef sizes, ScalarType dtype, Device device, const char* op);
// A view of `self`: same storage, shared version counter, base recorded.
Tensor make_view(const Tensor& self, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                 int64_t storage_offset, const char* op);

// Note [Version counter]
// A tensor's version counter (`_version()`, shared by its views) counts the user-visible
// in-place writes to it, as PyTorch's: copy_, fill_, zero_, add_ and the other `op_` forms
// bump it once each; autograd compares it with the version a saved tensor had. A new tensor
// starts at 0: an op filling the tensor it made (zeros, full, clone, contiguous, to, cat)
// writes through copy/fill below, which leave the counter alone.

/// dst <- src (broadcast to dst's shape; any dtypes, any devices), without the checks of
/// copy_ and without bumping dst's version.
void copy(const Tensor& dst, const Tensor& src);
/// Every element of t = value, without bumping t's version.
void fill(const Tensor& t, const Scalar& value);

}  // namespace tl::detail
