// The front-ends of indexing and joining: index_select, gather, scatter_add(_), nonzero,
// masked_select, cat, stack. Index tensors must be int64; how a bad index fails is the
// backend's (Note [Index checks], cpu/indexing.cpp).
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"

namespace tl {
namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  TL_CHECK(index.dtype() == kInt64, op, "(): expected an int64 index tensor, got ", index.dtype());
}

// gather and scatter treat a 0-dim tensor as a 1-element vector (PyTorch's
// ensure_nonempty_dim).
Tensor as_at_least_1d(const Tensor& t) {
  return t.dim() == 0 ? t.view({1}) : t;
}

}  // namespace

Tensor index_select_forward(const Tensor& t, int64_t dim, const Tensor& index);

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  Tensor out = autograd::forward_no_grad([&] { return index_select_forward(t, dim, index); });
  // The gradient scatters back to the selected positions (summing repeats).
  autograd::record(
      out, "IndexSelect", {&t}, {index},
      [sizes = t.sizes().vec(), dim](const autograd::variable_list& g,
                                     const autograd::variable_list& s) {
        const int64_t d = detail::wrap_dim(dim, static_cast<int64_t>(sizes.size()));
        std::vector<int64_t> shape(g[0].dim(), 1);
        if (g[0].dim() > 0) shape[d] = -1;
        Tensor idx = g[0].dim() > 0 ? s[0].reshape(shape).expand(g[0].sizes()) : s[0];
        return autograd::variable_list{tl::zeros(sizes, g[0].options()).scatter_add(d, idx, g[0])};
      });
  return out;
}

Tensor index_select_forward(const Tensor& t, int64_t dim, const Tensor& index) {
  const Device device = detail::check_device("index_select", {&t, &index});
  check_index_dtype("index_select", index);
  TL_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got a ",
           index.dim(), "-D tensor of shape ", index.sizes());
  const int64_t d = detail::wrap_dim(dim, t.dim());
  TL_CHECK(t.dim() > 0 || index.numel() == 1,
           "index_select(): a 0-dim input takes exactly one index, got ", index.numel());
  std::vector<int64_t> out_sizes = t.sizes().vec();
  if (t.dim() > 0) out_sizes[d] = index.numel();
  Tensor out = empty(out_sizes, t.options());
  detail::kernels_for(device).index_select(out, t, d, index.reshape({-1}));
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
  detail::kernels_for(device).gather(out.view(idx.sizes()), self, d, idx);
  return out;
}

namespace {
// scatter_add_ without bumping the version (Note [Version counter]).
void scatter_add_into(const Tensor& target, int64_t dim, const Tensor& index, const Tensor& src) {
  const Device device = detail::check_device("scatter_add_", {&target, &index, &src});
  check_index_dtype("scatter_add_", index);
  TL_CHECK(target.dtype() == src.dtype(),
           "scatter_add_(): Expected self.dtype to be equal to src.dtype (got ", target.dtype(),
           " and ", src.dtype(), ")");
  const Tensor self = as_at_least_1d(target);
  const Tensor idx = as_at_least_1d(index);
  const Tensor source = as_at_least_1d(src);
  TL_CHECK(idx.dim() == self.dim() && source.dim() == self.dim(),
           "scatter_add_(): Index tensor must have the same number of dimensions as self and src "
           "(got index ",
           index.sizes(), ", self ", target.sizes(), ", src ", src.sizes(), ")");
  const int64_t d = detail::wrap_dim(dim, self.dim());
  for (int64_t i = 0; i < self.dim(); ++i) {
    TL_CHECK(idx.size(i) <= source.size(i) && (i == d || idx.size(i) <= self.size(i)),
             "scatter_add_(): Expected index ", index.sizes(), " to be smaller than self ",
             target.sizes(), " apart from dimension ", d, " and to be smaller than src ",
             src.sizes());
  }
  detail::kernels_for(device).scatter_add(self, d, idx, source);
}
}  // namespace

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_add_into(*this, dim, index, src);
  bump_version();
  return *this;
}

Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = autograd::forward_no_grad([&] {
    Tensor o = t.clone();
    scatter_add_into(o, dim, index, src);
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
    lengths.push_back(t.dim() == 1 && t.size(0) == 0
                          ? -1
                          : t.size(out.dim() > 0 ? detail::wrap_dim(dim, out.dim()) : 0));
  }
  // Each input's gradient is its slice of the output gradient.
  autograd::record(
      out, "Cat", inputs, {},
      [lengths, dim](const autograd::variable_list& g, const autograd::variable_list&) {
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
    detail::copy(out.narrow(d, offset, t.size(d)), t);  // Note [Version counter]
    offset += t.size(d);
  }
  return out;
}

// ---- Data-dependent selection --------------------------------------------------------------

namespace {
// The linear positions of the true elements of a contiguous bool tensor, int64 1-D.
Tensor flat_nonzero(const Tensor& flags) {
  return detail::kernels_for(flags.device()).flat_nonzero(flags);
}
}  // namespace

Tensor nonzero(const Tensor& t) {
  detail::check_device("nonzero", {&t});
  NoGradGuard no_grad;
  const Tensor flat = flat_nonzero(t.ne(0).contiguous());
  Tensor out = empty({flat.numel(), t.dim()}, flat.options());
  if (out.numel() == 0) return out;
  detail::kernels_for(flat.device()).unravel(out, flat, t.sizes());
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

Tensor Tensor::nonzero() const {
  return tl::nonzero(*this);
}
Tensor Tensor::masked_select(const Tensor& mask) const {
  return tl::masked_select(*this, mask);
}

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
