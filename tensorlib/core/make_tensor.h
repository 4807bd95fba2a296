// Constructors of TensorImpls used by factories, views and ops (internal to tensorlib).
#pragma once

#include "tensorlib/core/tensor.h"

namespace tl::detail {

// A new tensor on its own storage (contiguous), tagged with the op that made it.
Tensor make_tensor(IntArrayRef sizes, ScalarType dtype, Device device, const char* op);
// A view of `self`: same storage, shared version counter, base recorded.
Tensor make_view(const Tensor& self, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                 int64_t storage_offset, const char* op);

}  // namespace tl::detail
