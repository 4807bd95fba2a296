// View ops: each returns a tensor sharing the input's storage (Note [Views and version
// counters] in tensor.h). Only reshape/flatten (when strides do not allow a view),
// contiguous() and clone() copy.
#include <numeric>

#include "tensorlib/autograd/function.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"

namespace tl {

using autograd::record;
using autograd::variable_list;
using detail::make_view;
using detail::wrap_dim;

namespace {
// Backward of a view that keeps every element (view, reshape, squeeze, ...): the gradient
// reshaped to the input's shape.
void record_reshape_like(const Tensor& out, const Tensor& self, const char* op) {
  record(out, op, {&self}, {},
         [sizes = self.sizes().vec()](const variable_list& g, const variable_list&) {
           return variable_list{g[0].reshape(sizes)};
         });
}
// Backward of a view that picks some elements (select, narrow, slice, diagonal): the
// gradient written into the same view of a zero tensor shaped like the input.
template <typename View>
void record_scatter_like(const Tensor& out, const Tensor& self, const char* op, View view) {
  record(out, op, {&self}, {},
         [sizes = self.sizes().vec(), view](const variable_list& g, const variable_list&) {
           Tensor grad = tl::zeros(sizes, g[0].options());
           view(grad).copy_(g[0]);
           return variable_list{grad};
         });
}
}  // namespace

namespace detail {

Tensor make_tensor(IntArrayRef sizes, ScalarType dtype, Device device, const char* op) {
  for (int64_t s : sizes) TL_CHECK(s >= 0, op, ": negative dimension ", s, " in size ", sizes);
  int64_t n = numel_of(sizes);
  auto storage = std::make_shared<StorageImpl>(n * element_size(dtype), device);
  auto impl = std::make_shared<TensorImpl>(std::move(storage), sizes.vec(),
                                           contiguous_strides(sizes), 0, dtype);
  impl->set_origin(op, nullptr);
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& self, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                 int64_t storage_offset, const char* op) {
  auto impl = std::make_shared<TensorImpl>(self.storage(), std::move(sizes), std::move(strides),
                                           storage_offset, self.dtype());
  impl->set_origin(op, self.impl_ptr());
  return Tensor(std::move(impl));
}

}  // namespace detail

Tensor Tensor::view(IntArrayRef sizes) const {
  auto shape = detail::infer_size(sizes, numel());
  auto st = detail::view_strides(this->sizes(), strides(), shape);
  TL_CHECK(st.has_value(),
           "view size is not compatible with input tensor's size and stride (at least one "
           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  Tensor out = make_view(*this, std::move(shape), std::move(*st), storage_offset(), "view");
  record_reshape_like(out, *this, "View");
  return out;
}

Tensor Tensor::reshape(IntArrayRef sizes) const {
  auto shape = detail::infer_size(sizes, numel());
  Tensor out;
  if (auto st = detail::view_strides(this->sizes(), strides(), shape)) {
    out = make_view(*this, std::move(shape), std::move(*st), storage_offset(), "reshape");
  } else {
    // Not expressible as a view: copy, as PyTorch does.
    out = detail::make_tensor(shape, dtype(), device(), "reshape");
    detail::copy(out.view(this->sizes()), *this);
  }
  record_reshape_like(out, *this, "Reshape");
  return out;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t n = dim();
  dim0 = wrap_dim(dim0, n);
  dim1 = wrap_dim(dim1, n);
  auto sz = sizes().vec();
  auto st = strides().vec();
  if (n > 0) {
    std::swap(sz[dim0], sz[dim1]);
    std::swap(st[dim0], st[dim1]);
  }
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "transpose");
  record(out, "Transpose", {this}, {}, [dim0, dim1](const variable_list& g, const variable_list&) {
    return variable_list{g[0].transpose(dim0, dim1)};
  });
  return out;
}

Tensor Tensor::t() const {
  TL_CHECK(dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  if (dim() < 2) {
    Tensor out = make_view(*this, sizes().vec(), strides().vec(), storage_offset(), "t");
    record_reshape_like(out, *this, "T");
    return out;
  }
  return transpose(0, 1);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  int64_t n = dim();
  TL_CHECK(static_cast<int64_t>(dims.size()) == n,
           "permute: number of dims don't match in permute (input.dim() = ", n,
           ", len(dims) = ", dims.size(), ")");
  std::vector<int64_t> sz(n), st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n);
    TL_CHECK(!seen[d], "permute: repeated dim ", d, " in dims ", dims);
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "permute");
  std::vector<int64_t> inverse(n);
  for (int64_t i = 0; i < n; ++i) inverse[wrap_dim(dims[i], n)] = i;
  record(out, "Permute", {this}, {}, [inverse](const variable_list& g, const variable_list&) {
    return variable_list{g[0].permute(inverse)};
  });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TL_CHECK(dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  d = wrap_dim(d, dim());
  int64_t cur = sizes()[d];
  TL_CHECK_INDEX(start >= -cur && start <= cur, "start out of range (expected to be in range of [",
                 -cur, ", ", cur, "], but got ", start, ")");
  if (start < 0) start += cur;
  TL_CHECK(length >= 0 && start <= cur - length, "start (", start, ") + length (", length,
           ") exceeds dimension size (", cur, ").");
  auto sz = sizes().vec();
  sz[d] = length;
  Tensor out = make_view(*this, std::move(sz), strides().vec(),
                         storage_offset() + start * strides()[d], "narrow");
  record_scatter_like(out, *this, "Narrow",
                      [d, start, length](const Tensor& t) { return t.narrow(d, start, length); });
  return out;
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt,
                     int64_t step) const {
  TL_CHECK(dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  TL_CHECK(step > 0, "slice step must be positive, got ", step);
  d = wrap_dim(d, dim());
  int64_t cur = sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(cur);
  // Python slice semantics: negative counts from the end, out of range clamps.
  if (start < 0) start += cur;
  if (end < 0) end += cur;
  start = std::clamp<int64_t>(start, 0, cur);
  end = std::clamp<int64_t>(end, start, cur);
  auto sz = sizes().vec();
  auto st = strides().vec();
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = make_view(*this, std::move(sz), std::move(st),
                         storage_offset() + start * strides()[d], "slice");
  record_scatter_like(out, *this, "Slice", [d, start, end, step](const Tensor& t) {
    return t.slice(d, start, end, step);
  });
  return out;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TL_CHECK_INDEX(dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  d = wrap_dim(d, dim());
  int64_t cur = sizes()[d];
  TL_CHECK_INDEX(index >= -cur && index < cur, "index ", index, " is out of bounds for dimension ",
                 d, " with size ", cur);
  if (index < 0) index += cur;
  auto sz = sizes().vec();
  auto st = strides().vec();
  int64_t offset = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(*this, std::move(sz), std::move(st), offset, "select");
  record_scatter_like(out, *this, "Select",
                      [d, index](const Tensor& t) { return t.select(d, index); });
  return out;
}

Tensor Tensor::expand(IntArrayRef target) const {
  int64_t n = dim(), m = static_cast<int64_t>(target.size());
  TL_CHECK(m >= n, "expand: the number of sizes provided (", m,
           ") must be greater or equal to the number of dimensions in the tensor (", n, ")");
  std::vector<int64_t> sz(m), st(m);
  for (int64_t i = m - 1; i >= 0; --i) {
    int64_t j = i - (m - n);  // matching dim of self, or < 0 for a new leading dim
    int64_t want = target[i];
    if (j < 0) {
      TL_CHECK(want >= 0, "expand: the expanded size of the tensor (", want,
               ") isn't allowed in a leading, non-existing dimension ", i);
      sz[i] = want;
      st[i] = 0;
      continue;
    }
    int64_t have = sizes()[j];
    if (want == -1) want = have;
    TL_CHECK(have == want || have == 1, "The expanded size of the tensor (", want,
             ") must match the existing size (", have, ") at non-singleton dimension ", i,
             ".  Target sizes: ", target, ".  Tensor sizes: ", sizes());
    sz[i] = want;
    st[i] = (have == want) ? strides()[j] : 0;
  }
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "expand");
  record(out, "Expand", {this}, {},
         [sizes = sizes().vec()](const variable_list& g, const variable_list&) {
           return variable_list{autograd::sum_to(g[0], sizes)};
         });
  return out;
}

Tensor Tensor::squeeze() const {
  std::vector<int64_t> sz, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] == 1) continue;
    sz.push_back(sizes()[i]);
    st.push_back(strides()[i]);
  }
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "squeeze");
  record_reshape_like(out, *this, "Squeeze");
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  auto sz = sizes().vec();
  auto st = strides().vec();
  if (dim() > 0) {
    d = wrap_dim(d, dim());
    if (sz[d] == 1) {
      sz.erase(sz.begin() + d);
      st.erase(st.begin() + d);
    }
  } else {
    wrap_dim(d, 0);
  }
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "squeeze");
  record_reshape_like(out, *this, "Squeeze");
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1);
  auto sz = sizes().vec();
  auto st = strides().vec();
  int64_t new_stride = d < dim() ? sz[d] * st[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  Tensor out = make_view(*this, std::move(sz), std::move(st), storage_offset(), "unsqueeze");
  record_reshape_like(out, *this, "Unsqueeze");
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim());
  end_dim = wrap_dim(end_dim, dim());
  TL_CHECK(start_dim <= end_dim, "flatten() has invalid args: start_dim (", start_dim,
           ") cannot come after end_dim (", end_dim, ")");
  if (start_dim == end_dim) return *this;
  std::vector<int64_t> shape(sizes().begin(), sizes().begin() + start_dim);
  int64_t n = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) n *= sizes()[i];
  shape.push_back(n);
  shape.insert(shape.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t d, IntArrayRef new_sizes) const {
  TL_CHECK(dim() > 0, "unflatten: cannot unflatten a 0-dim tensor");
  d = wrap_dim(d, dim());
  TL_CHECK(!new_sizes.empty(), "unflatten: sizes must be non-empty");
  auto inner = detail::infer_size(new_sizes, sizes()[d]);
  std::vector<int64_t> shape(sizes().begin(), sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), sizes().begin() + d + 1, sizes().end());
  return view(shape);
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  TL_CHECK(dim() >= 2, "diagonal: expected a tensor with at least 2 dimensions, got ", dim(), "D");
  dim1 = wrap_dim(dim1, dim());
  dim2 = wrap_dim(dim2, dim());
  TL_CHECK(dim1 != dim2, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  int64_t len, start = storage_offset();
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(sizes()[dim1], sizes()[dim2] - offset), 0);
    if (len > 0) start += offset * strides()[dim2];
  } else {
    len = std::max<int64_t>(std::min(sizes()[dim1] + offset, sizes()[dim2]), 0);
    if (len > 0) start -= offset * strides()[dim1];
  }
  std::vector<int64_t> sz, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (i == dim1 || i == dim2) continue;
    sz.push_back(sizes()[i]);
    st.push_back(strides()[i]);
  }
  sz.push_back(len);
  st.push_back(strides()[dim1] + strides()[dim2]);
  Tensor out = make_view(*this, std::move(sz), std::move(st), start, "diagonal");
  record_scatter_like(out, *this, "Diagonal", [offset, dim1, dim2](const Tensor& t) {
    return t.diagonal(offset, dim1, dim2);
  });
  return out;
}

Tensor Tensor::as_strided(IntArrayRef sz, IntArrayRef st,
                          std::optional<int64_t> storage_offset_opt) const {
  TL_CHECK(sz.size() == st.size(), "as_strided: mismatch in length of strides and shape (",
           sz.size(), " vs ", st.size(), ")");
  int64_t offset = storage_offset_opt.value_or(storage_offset());
  TL_CHECK(offset >= 0, "as_strided: negative storage offset ", offset);
  int64_t last = offset;  // highest element index touched
  bool empty = false;
  for (size_t i = 0; i < sz.size(); ++i) {
    TL_CHECK(sz[i] >= 0 && st[i] >= 0, "as_strided: negative size or stride in ", sz, " / ", st);
    if (sz[i] == 0)
      empty = true;
    else
      last += (sz[i] - 1) * st[i];
  }
  int64_t capacity = static_cast<int64_t>(storage()->nbytes() / element_size());
  TL_CHECK(empty || last < capacity, "setStorage: sizes ", sz, ", strides ", st,
           ", storage offset ", offset, " require ", (last + 1) * int64_t(element_size()),
           " bytes, but the storage has only ", storage()->nbytes(), " bytes");
  Tensor out = make_view(*this, sz.vec(), st.vec(), offset, "as_strided");
  // The gradient lands in a buffer laid out like the storage, at the view's positions, and
  // is read back at the input's positions. Overlapping windows (the same element in several
  // places of the view) are not summed: the last write wins.
  record(out, "AsStrided", {this}, {},
         [in_sizes = sizes().vec(), in_strides = strides().vec(), in_offset = storage_offset(),
          out_sizes = sz.vec(), out_strides = st.vec(), out_offset = offset,
          extent = static_cast<int64_t>(storage()->nbytes() / element_size())](
             const variable_list& g, const variable_list&) {
           Tensor buffer = tl::zeros({extent}, g[0].options());
           buffer.as_strided(out_sizes, out_strides, out_offset).copy_(g[0]);
           return variable_list{buffer.as_strided(in_sizes, in_strides, in_offset).clone()};
         });
  return out;
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  TL_CHECK(dim() > 0, "split expects at least a 1-dimensional tensor");
  TL_CHECK(split_size >= 0, "split expects split_size be non-negative, but got ", split_size);
  d = wrap_dim(d, dim());
  int64_t n = sizes()[d];
  TL_CHECK(split_size > 0 || n == 0, "split_size can only be 0 if dimension size is 0");
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(narrow(d, 0, 0));
    return out;
  }
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(narrow(d, s, std::min(split_size, n - s)));
  return out;
}

std::vector<Tensor> Tensor::split_with_sizes(IntArrayRef split_sizes, int64_t d) const {
  d = wrap_dim(d, dim());
  int64_t total = std::accumulate(split_sizes.begin(), split_sizes.end(), int64_t(0));
  TL_CHECK(total == sizes()[d], "split_with_sizes expects split_sizes to sum exactly to ",
           sizes()[d], " (input tensor's size at dimension ", d,
           "), but got split_sizes=", split_sizes);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  TL_CHECK(dim() > 0, "chunk expects at least a 1-dimensional tensor");
  TL_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  d = wrap_dim(d, dim());
  int64_t n = sizes()[d];
  int64_t split_size = (n + chunks - 1) / chunks;
  if (split_size == 0 && n == 0) {
    std::vector<Tensor> out;
    for (int64_t i = 0; i < chunks; ++i) out.push_back(narrow(d, 0, 0));
    return out;
  }
  return split(split_size, d);
}

std::vector<Tensor> Tensor::unbind(int64_t d) const {
  TL_CHECK(dim() > 0, "Dimension specified as 0 but tensor has no dimensions");
  d = wrap_dim(d, dim());
  std::vector<Tensor> out;
  for (int64_t i = 0; i < sizes()[d]; ++i) out.push_back(select(d, i));
  return out;
}

Tensor Tensor::contiguous() const {
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  Tensor out = detail::make_tensor(sizes(), dtype(), device(), "clone");
  detail::copy(out, *this);  // a new tensor: version 0 (Note [Version counter])
  record(out, "Clone", {this}, {},
         [](const variable_list& g, const variable_list&) { return variable_list{g[0]}; });
  return out;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(storage(), sizes().vec(), strides().vec(),
                                           storage_offset(), dtype());
  impl->share_version_counter(impl_->version_counter());
  impl->set_origin("detach", nullptr);
  return Tensor(std::move(impl));
}

// Free-function spellings.
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  return t.transpose(d0, d1);
}
Tensor permute(const Tensor& t, IntArrayRef dims) {
  return t.permute(dims);
}
Tensor reshape(const Tensor& t, IntArrayRef sizes) {
  return t.reshape(sizes);
}
Tensor flatten(const Tensor& t, int64_t s, int64_t e) {
  return t.flatten(s, e);
}
Tensor squeeze(const Tensor& t) {
  return t.squeeze();
}
Tensor unsqueeze(const Tensor& t, int64_t d) {
  return t.unsqueeze(d);
}
Tensor narrow(const Tensor& t, int64_t d, int64_t s, int64_t l) {
  return t.narrow(d, s, l);
}
Tensor diagonal(const Tensor& t, int64_t o, int64_t d1, int64_t d2) {
  return t.diagonal(o, d1, d2);
}
Tensor as_strided(const Tensor& t, IntArrayRef sz, IntArrayRef st, std::optional<int64_t> off) {
  return t.as_strided(sz, st, off);
}
std::vector<Tensor> split(const Tensor& t, int64_t s, int64_t d) {
  return t.split(s, d);
}
std::vector<Tensor> chunk(const Tensor& t, int64_t c, int64_t d) {
  return t.chunk(c, d);
}
std::vector<Tensor> unbind(const Tensor& t, int64_t d) {
  return t.unbind(d);
}

}  // namespace tl
