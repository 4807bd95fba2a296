// The front-ends of copy_, fill_ and dtype/device conversion; the loops are each backend's
// copy and fill (Note [Device dispatch]).
#include "tensorlib/autograd/function.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/tensor.h"

namespace tl {

namespace {
// PyTorch's assert_no_partial_overlap for copy_: a source that shares part of the written
// memory (x[1:].copy_(x[:-1])) would be read while being overwritten, with a result that
// depends on the order of the writes (on a GPU, on the launch). Decided, as PyTorch does, only
// where both tensors are dense; the very same memory (x.copy_(x)) is allowed.
void check_no_partial_overlap(const char* op, const Tensor& dst, const Tensor& src) {
  if (dst.storage().get() != src.storage().get() || dst.numel() == 0 || src.numel() == 0) return;
  if (!dst.is_contiguous() || !src.is_contiguous()) return;
  const auto* a = static_cast<const char*>(dst.data_ptr());
  const auto* b = static_cast<const char*>(src.data_ptr());
  const char* a_end = a + dst.nbytes();
  const char* b_end = b + src.nbytes();
  if (a == b && a_end == b_end) return;
  TL_CHECK(!(a < b_end && b < a_end), op,
           ": unsupported operation: some elements of the input tensor and the written-to tensor "
           "refer to a single memory location. Please clone() the tensor before performing the "
           "operation.");
}
}  // namespace

namespace detail {

void copy(const Tensor& dst, const Tensor& src) {
  const Tensor s = src.sizes() == dst.sizes() ? src : src.expand(dst.sizes());
  // A copy between the CPU and another device runs on the other device's backend.
  kernels_for(dst.is_cpu() ? s.device() : dst.device()).copy(dst, s);
}

void fill(const Tensor& t, const Scalar& value) {
  kernels_for(t.device()).fill(t, value);
}

}  // namespace detail

Tensor& Tensor::copy_(const Tensor& src) {
  TL_CHECK(defined() && src.defined(), "copy_: expected a defined tensor");
  if (autograd::needs_grad({this, &src})) {
    autograd::check_inplace(*this, "copy_");
    {
      NoGradGuard no_grad;
      copy_(src);
    }
    // The old value is overwritten: no gradient flows to it; src gets the gradient summed
    // back to its shape.
    autograd::record(
        *this, "Copy", {this, &src}, {},
        [ss = src.sizes().vec(), dt = src.dtype()](const autograd::variable_list& g,
                                                   const autograd::variable_list&) {
          return autograd::variable_list{tl::zeros_like(g[0]), autograd::sum_to(g[0], ss).to(dt)};
        });
    if (is_view()) autograd::rebase_view_base(*this, *this);
    return *this;
  }
  detail::check_no_internal_overlap("copy_", *this);
  check_no_partial_overlap("copy_", *this, src);
  detail::copy(*this, src);
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  TL_CHECK(defined(), "fill_: expected a defined tensor");
  detail::check_no_internal_overlap("fill_", *this);
  detail::fill(*this, value);
  bump_version();
  return *this;
}

Tensor Tensor::pin_memory() const {
  TL_CHECK(defined() && is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on ",
           defined() ? device().str() : std::string("nothing"));
  const detail::CudaHooks* hooks = detail::cuda_hooks();
  TL_CHECK(hooks != nullptr && hooks->is_available(),
           "pin_memory: needs the CUDA backend and a CUDA device (",
           hooks == nullptr ? "this build has no CUDA backend" : "no CUDA device is available",
           ")");
  return hooks->is_pinned(*this) ? *this : hooks->pin_memory(*this);
}

bool Tensor::is_pinned() const {
  if (!defined() || !is_cpu() || storage()->data() == nullptr) return false;
  const detail::CudaHooks* hooks = detail::cuda_hooks();
  return hooks != nullptr && hooks->is_pinned(*this);
}

Tensor Tensor::to(ScalarType dtype, bool copy) const {
  return to(device(), dtype, copy);
}
Tensor Tensor::to(Device device, bool copy) const {
  return to(device, dtype(), copy);
}
Tensor Tensor::to(TensorOptions options, bool copy) const {
  return to(options.device(), options.has_dtype() ? options.dtype() : dtype(), copy);
}

Tensor Tensor::to(Device device, ScalarType dtype, bool copy) const {
  if (!copy && dtype == this->dtype() && device.resolved() == this->device()) return *this;
  Tensor out = detail::make_tensor(sizes(), dtype, device, "to");
  detail::copy(out, *this);
  autograd::record(
      out, "ToCopy", {this}, {},
      [dt = this->dtype()](const autograd::variable_list& g, const autograd::variable_list&) {
        return autograd::variable_list{g[0].to(dt)};
      });
  return out;
}

}  // namespace tl
