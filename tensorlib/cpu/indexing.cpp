// CPU indexing and joining: index_select, gather, scatter_add(_), cat, stack.
//
// Index tensors must be int64 and every index is checked before anything is written, so a bad
// index raises tl::IndexError (naming the index, the dim and its size) and leaves an in-place
// target untouched. On CUDA tensors the kernels check indices on the device instead (a bad one
// stops the kernel, as PyTorch's device-side assert; cuda/indexing.cu). Negative indices are out of range, as in PyTorch's index_select, gather
// and scatter.
#include <cstring>
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/cuda_kernels.h"
#include "tensorlib/core/error.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {
namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  TL_CHECK(index.dtype() == kInt64, op, "(): expected an int64 index tensor, got ", index.dtype());
}

void check_in_range(const char* op, int64_t index, int64_t dim, int64_t size) {
  TL_CHECK_INDEX(index >= 0 && index < size, op, "(): index ", index,
                 " is out of bounds for dimension ", dim, " with size ", size);
}

// gather and scatter treat a 0-dim tensor as a 1-element vector (PyTorch's
// ensure_nonempty_dim).
Tensor as_at_least_1d(const Tensor& t) {
  return t.dim() == 0 ? t.view({1}) : t;
}

// Walks every position of `shape` in row-major order, calling f(index_off, self_off, other_off)
// with element offsets computed from the three stride lists; self's stride along `dim` is left
// out (the caller adds index * stride).
template <typename F>
void for_each_position(IntArrayRef shape, int64_t dim, IntArrayRef index_strides,
                       IntArrayRef self_strides, IntArrayRef other_strides, F f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t n = detail::numel_of(shape);
  std::vector<int64_t> self_step(self_strides.begin(), self_strides.end());
  self_step[dim] = 0;
  std::vector<int64_t> pos(nd, 0);
  int64_t oi = 0, os = 0, oo = 0;
  for (int64_t it = 0; it < n; ++it) {
    f(oi, os, oo);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[d] < shape[d]) {
        oi += index_strides[d];
        os += self_step[d];
        oo += other_strides[d];
        break;
      }
      oi -= index_strides[d] * (shape[d] - 1);
      os -= self_step[d] * (shape[d] - 1);
      oo -= other_strides[d] * (shape[d] - 1);
      pos[d] = 0;
    }
  }
}

// Checks every index of `index` against `size` before any element is touched.
void check_all_in_range(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  const Tensor idx = index.contiguous();
  const int64_t* p = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) check_in_range(op, p[i], dim, size);
}

}  // namespace

Tensor index_select_forward(const Tensor& t, int64_t dim, const Tensor& index);

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  Tensor out = autograd::forward_no_grad([&] { return index_select_forward(t, dim, index); });
  // The gradient scatters back to the selected positions (summing repeats).
  autograd::record(out, "IndexSelect", {&t}, {index},
                   [sizes = t.sizes().vec(), dim](const autograd::variable_list& g,
                                                  const autograd::variable_list& s) {
                     const int64_t d = detail::wrap_dim(dim, static_cast<int64_t>(sizes.size()));
                     std::vector<int64_t> shape(g[0].dim(), 1);
                     if (g[0].dim() > 0) shape[d] = -1;
                     Tensor idx = g[0].dim() > 0 ? s[0].reshape(shape).expand(g[0].sizes()) : s[0];
                     return autograd::variable_list{
                         tl::zeros(sizes, g[0].options()).scatter_add(d, idx, g[0])};
                   });
  return out;
}

Tensor index_select_forward(const Tensor& t, int64_t dim, const Tensor& index) {
  const Device device = detail::check_device("index_select", {&t, &index});
  check_index_dtype("index_select", index);
  TL_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got a ",
           index.dim(), "-D tensor of shape ", index.sizes());
  const int64_t d = detail::wrap_dim(dim, t.dim());
  if (device.is_cuda()) {  // a gather with the index expanded along the other dims
    TL_CHECK(t.dim() > 0 || index.numel() == 1,
             "index_select(): a 0-dim input takes exactly one index, got ", index.numel());
    const Tensor self = as_at_least_1d(t);
    std::vector<int64_t> out_sizes = self.sizes().vec(), shape(self.dim(), 1);
    out_sizes[d] = index.numel();
    shape[d] = index.numel();
    Tensor out = empty(out_sizes, t.options());
    detail::cuda_kernels()->gather(out, self, d, index.reshape(shape).expand(out_sizes));
    return t.dim() == 0 ? out.view({}) : out;
  }
  const Tensor src = t.contiguous();
  const Tensor idx = index.contiguous();
  const int64_t n_idx = idx.numel();
  const int64_t dim_size = t.dim() == 0 ? 1 : t.size(d);
  check_all_in_range("index_select", idx, d, dim_size);

  std::vector<int64_t> out_sizes = t.sizes().vec();
  if (t.dim() == 0) {
    TL_CHECK(n_idx == 1, "index_select(): a 0-dim input takes exactly one index, got ", n_idx);
  } else {
    out_sizes[d] = n_idx;
  }
  Tensor out = empty(out_sizes, t.dtype());
  if (out.numel() == 0) return out;

  // Copy whole inner blocks: out[o, j, :] = src[o, index[j], :].
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i < d) outer *= t.size(i);
    if (i > d) inner *= t.size(i);
  }
  const size_t block = static_cast<size_t>(inner) * t.element_size();
  const int64_t* ip = idx.data_ptr<int64_t>();
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  for (int64_t b = 0; b < outer; ++b) {
    for (int64_t j = 0; j < n_idx; ++j) {
      std::memcpy(o + (b * n_idx + j) * block, s + (b * dim_size + ip[j]) * block, block);
    }
  }
  return out;
}

Tensor gather_forward(const Tensor& t, int64_t dim, const Tensor& index);

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  Tensor out = autograd::forward_no_grad([&] { return gather_forward(t, dim, index); });
  autograd::record(out, "Gather", {&t}, {index},
                   [sizes = t.sizes().vec(), dim](const autograd::variable_list& g,
                                                  const autograd::variable_list& s) {
                     return autograd::variable_list{
                         tl::zeros(sizes, g[0].options()).scatter_add(dim, s[0], g[0])};
                   });
  return out;
}

Tensor gather_forward(const Tensor& t, int64_t dim, const Tensor& index) {
  const Device device = detail::check_device("gather", {&t, &index});
  check_index_dtype("gather", index);
  const Tensor self = as_at_least_1d(t);
  const Tensor idx = as_at_least_1d(index);
  TL_CHECK(idx.dim() == self.dim(),
           "gather(): Index tensor must have the same number of dimensions as input tensor "
           "(got index of shape ",
           index.sizes(), " and input of shape ", t.sizes(), ")");
  const int64_t d = detail::wrap_dim(dim, self.dim());
  for (int64_t i = 0; i < self.dim(); ++i) {
    TL_CHECK(i == d || idx.size(i) <= self.size(i), "gather(): Size does not match at dimension ",
             i, " expected index ", index.sizes(), " to be smaller than self ", t.sizes(),
             " apart from dimension ", d);
  }
  Tensor out = empty(index.sizes(), t.options());
  if (device.is_cuda()) {
    detail::cuda_kernels()->gather(out.view(idx.sizes()), self, d, idx);
    return out;
  }
  check_all_in_range("gather", idx, d, self.size(d));
  if (out.numel() == 0) return out;
  const std::vector<int64_t> out_strides = detail::contiguous_strides(idx.sizes());
  TL_DISPATCH_ALL(t.dtype(), "gather", [&]<typename T>() {
    const int64_t* ip = idx.data_ptr<int64_t>();
    const T* sp = self.data_ptr<T>();
    T* op = out.data_ptr<T>();
    const int64_t dim_stride = self.stride(d);
    for_each_position(
        idx.sizes(), d, idx.strides(), self.strides(), out_strides,
        [&](int64_t oi, int64_t os, int64_t oo) { op[oo] = sp[os + ip[oi] * dim_stride]; });
  });
  return out;
}

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  const Device device = detail::check_device("scatter_add_", {this, &index, &src});
  check_index_dtype("scatter_add_", index);
  TL_CHECK(dtype() == src.dtype(), "scatter_add_(): Expected self.dtype to be equal to src.dtype ",
           "(got ", dtype(), " and ", src.dtype(), ")");
  const Tensor self = as_at_least_1d(*this);
  const Tensor idx = as_at_least_1d(index);
  const Tensor source = as_at_least_1d(src);
  TL_CHECK(idx.dim() == self.dim() && source.dim() == self.dim(),
           "scatter_add_(): Index tensor must have the same number of dimensions as self and src "
           "(got index ",
           index.sizes(), ", self ", sizes(), ", src ", src.sizes(), ")");
  const int64_t d = detail::wrap_dim(dim, self.dim());
  for (int64_t i = 0; i < self.dim(); ++i) {
    TL_CHECK(idx.size(i) <= source.size(i) && (i == d || idx.size(i) <= self.size(i)),
             "scatter_add_(): Expected index ", index.sizes(), " to be smaller than self ", sizes(),
             " apart from dimension ", d, " and to be smaller than src ", src.sizes());
  }
  if (device.is_cuda()) {
    detail::cuda_kernels()->scatter_add(self, d, idx, source);
    bump_version();
    return *this;
  }
  check_all_in_range("scatter_add_", idx, d, self.size(d));
  bump_version();
  if (idx.numel() == 0) return *this;
  TL_DISPATCH_ALL(dtype(), "scatter_add_", [&]<typename T>() {
    using M = opmath_t<T>;
    const int64_t* ip = idx.data_ptr<int64_t>();
    T* dp = self.data_ptr<T>();
    const T* sp = source.data_ptr<T>();
    const int64_t dim_stride = self.stride(d);
    for_each_position(idx.sizes(), d, idx.strides(), self.strides(), source.strides(),
                      [&](int64_t oi, int64_t os, int64_t oo) {
                        T& dst = dp[os + ip[oi] * dim_stride];
                        dst = static_cast<T>(static_cast<M>(dst) + static_cast<M>(sp[oo]));
                      });
  });
  return *this;
}

Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = autograd::forward_no_grad([&] {
    Tensor o = t.clone();
    o.scatter_add_(dim, index, src);
    return o;
  });
  autograd::record(out, "ScatterAdd", {&t, &src}, {index},
                   [dim](const autograd::variable_list& g, const autograd::variable_list& s) {
                     return autograd::variable_list{g[0], g[0].gather(dim, s[0])};
                   });
  return out;
}

// PyTorch's rules: the result dtype promotes over all inputs; 1-D empty tensors (shape [0])
// are skipped whatever the other shapes (legacy behaviour code relies on); all others need the
// same number of dims and equal sizes outside `dim`.
Tensor cat_forward(TensorList tensors, int64_t dim);

Tensor cat(TensorList tensors, int64_t dim) {
  Tensor out = autograd::forward_no_grad([&] { return cat_forward(tensors, dim); });
  std::vector<const Tensor*> inputs;
  std::vector<int64_t> lengths;
  for (const Tensor& t : tensors) {
    inputs.push_back(&t);
    lengths.push_back(t.dim() == 1 && t.size(0) == 0 ? -1 : t.size(out.dim() > 0 ? detail::wrap_dim(dim, out.dim()) : 0));
  }
  // Each input's gradient is its slice of the output gradient.
  autograd::record(out, "Cat", inputs, {}, [lengths, dim](const autograd::variable_list& g,
                                                          const autograd::variable_list&) {
    const int64_t d = detail::wrap_dim(dim, g[0].dim());
    autograd::variable_list grads;
    int64_t offset = 0;
    for (int64_t len : lengths) {
      if (len < 0) {
        grads.emplace_back();  // a skipped empty 1-D input
        continue;
      }
      grads.push_back(g[0].narrow(d, offset, len));
      offset += len;
    }
    return grads;
  });
  return out;
}

Tensor cat_forward(TensorList tensors, int64_t dim) {
  TL_CHECK(!tensors.empty(), "cat(): expected a non-empty list of Tensors");
  ScalarType dtype = tensors[0].dtype();
  const Tensor* ref = nullptr;
  std::optional<Device> device;
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const Device td = detail::check_device("cat", {&t, &tensors[0]});
    device = td;
    TL_CHECK(t.dim() > 0, "cat(): zero-dimensional tensor (at position ", i,
             ") cannot be concatenated");
    dtype = promote_types(dtype, t.dtype());
    if (!ref && !skipped(t)) ref = &t;
  }
  const TensorOptions options = TensorOptions(dtype).device(*device);
  if (!ref) return empty({0}, options);

  const int64_t d = detail::wrap_dim(dim, ref->dim());
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    TL_CHECK(t.dim() == ref->dim(), "cat(): Tensors must have same number of dimensions: got ",
             ref->dim(), " and ", t.dim(), " (tensor number ", i, " in the list)");
    for (int64_t j = 0; j < t.dim(); ++j) {
      TL_CHECK(j == d || t.size(j) == ref->size(j), "cat(): Sizes of tensors must match except in ",
               "dimension ", d, ". Expected size ", ref->size(j), " but got size ", t.size(j),
               " for tensor number ", i, " in the list.");
    }
    total += t.size(d);
  }
  std::vector<int64_t> out_sizes = ref->sizes().vec();
  out_sizes[d] = total;
  Tensor out = empty(out_sizes, options);
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t) || t.size(d) == 0) continue;
    out.narrow(d, offset, t.size(d)).copy_(t);
    offset += t.size(d);
  }
  return out;
}

// ---- Data-dependent selection --------------------------------------------------------------

namespace {
// The linear positions of the true elements of a contiguous bool tensor, int64 1-D.
Tensor flat_nonzero(const Tensor& flags) {
  if (flags.is_cuda()) return detail::cuda_kernels()->flat_nonzero(flags);
  const bool* p = flags.data_ptr<bool>();
  std::vector<int64_t> at;
  for (int64_t i = 0; i < flags.numel(); ++i)
    if (p[i]) at.push_back(i);
  Tensor out = empty({static_cast<int64_t>(at.size())}, kInt64);
  if (!at.empty()) std::memcpy(out.data_ptr(), at.data(), at.size() * sizeof(int64_t));
  return out;
}
}  // namespace

Tensor nonzero(const Tensor& t) {
  detail::check_device("nonzero", {&t});
  NoGradGuard no_grad;
  const Tensor flat = flat_nonzero(t.ne(0).contiguous());
  Tensor out = empty({flat.numel(), t.dim()}, flat.options());
  if (out.numel() == 0) return out;
  if (flat.is_cuda()) {
    detail::cuda_kernels()->unravel(out, flat, t.sizes());
    return out;
  }
  const int64_t* f = flat.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    int64_t rest = f[i];
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      o[i * t.dim() + d] = rest % t.size(d);
      rest /= t.size(d);
    }
  }
  return out;
}

// Selecting through the linear positions of the (broadcast) mask makes the gradient
// index_select's: it scatters back to the selected elements.
Tensor masked_select(const Tensor& t, const Tensor& mask) {
  detail::check_device("masked_select", {&t, &mask});
  TL_CHECK(mask.dtype() == kBool, "masked_select: expected a bool mask, got ", mask.dtype());
  const std::vector<int64_t> shape = broadcast_shapes(t.sizes(), mask.sizes());
  Tensor at;
  {
    NoGradGuard no_grad;
    at = flat_nonzero(mask.expand(shape).contiguous());
  }
  return t.expand(shape).reshape({-1}).index_select(0, at);
}

Tensor Tensor::nonzero() const { return tl::nonzero(*this); }
Tensor Tensor::masked_select(const Tensor& mask) const { return tl::masked_select(*this, mask); }

Tensor stack(TensorList tensors, int64_t dim) {
  TL_CHECK(!tensors.empty(), "stack(): expected a non-empty list of Tensors");
  for (size_t i = 1; i < tensors.size(); ++i) {
    TL_CHECK(tensors[i].sizes() == tensors[0].sizes(),
             "stack expects each tensor to be equal size, but got ", tensors[0].sizes(),
             " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  const int64_t d = detail::wrap_dim(dim, tensors[0].dim() + 1);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return cat(parts, d);
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return tl::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return tl::gather(*this, dim, index);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tl::scatter_add(*this, dim, index, src);
}

}  // namespace tl
