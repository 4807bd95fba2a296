#include "tensorlib/core/shape_util.h"

#include "tensorlib/base/error.h"

namespace tl::detail {

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = ndim == 0 ? 1 : ndim;
  TL_CHECK_INDEX(dim >= -n && dim < n, "Dimension out of range (expected to be in range of [", -n,
                 ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> contiguous_strides(IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t numel_of(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<int64_t> infer_size(IntArrayRef shape, int64_t numel) {
  std::vector<int64_t> out = shape.vec();
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TL_CHECK(!infer, "only one dimension can be inferred");
      infer = i;
    } else {
      TL_CHECK(out[i] >= 0, "invalid shape dimension ", out[i]);
      known *= out[i];
    }
  }
  if (infer) {
    TL_CHECK(known != 0 && numel % known == 0, "shape '", shape, "' is invalid for input of size ",
             numel);
    out[*infer] = numel / known;
  } else {
    TL_CHECK(known == numel, "shape '", shape, "' is invalid for input of size ", numel);
  }
  return out;
}

// Note [View strides]
// Splits the old shape into chunks of dims that are contiguous with one another in memory
// (stride[i] == stride[i+1] * size[i+1]); each chunk can be re-split into any new dims with
// the same element count. A view is possible exactly when the new dims tile those chunks.
std::optional<std::vector<int64_t>> view_strides(IntArrayRef sizes, IntArrayRef strides,
                                                 IntArrayRef new_sizes) {
  std::vector<int64_t> out(new_sizes.size());
  if (sizes.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  if (numel_of(sizes) == 0) {
    return contiguous_strides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    bool chunk_ends =
        d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::vector<bool> dim_mask(IntArrayRef dims, int64_t ndim, const char* op) {
  std::vector<bool> mask(std::max<int64_t>(ndim, 0), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim);
    if (ndim == 0) continue;
    TL_CHECK(!mask[w], op, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

}  // namespace tl::detail
