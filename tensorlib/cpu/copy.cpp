// copy_, fill_ and dtype/device conversion.
#include "tensorlib/autograd/function.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {

namespace cpu {

// PyTorch refuses to write through a tensor where several elements share one memory location
// (an expanded tensor), since the result would depend on iteration order.
void check_no_internal_overlap(const char* op, const Tensor& t) {
  for (int64_t i = 0; i < t.dim(); ++i) {
    TL_CHECK(!(t.strides()[i] == 0 && t.sizes()[i] > 1), op,
             ": unsupported operation: more than one element of the written-to tensor refers to "
             "a single memory location. Please clone() the tensor before performing the "
             "operation.");
  }
}

}  // namespace cpu

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

using cpu::check_no_internal_overlap;

namespace {
// CUDA tensors take the backend's copy (Note [CUDA copies] in tensorlib/cuda/copy.cpp).
const detail::CudaHooks* cuda_copy_hooks(const Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined() || (dst.is_cpu() && src.is_cpu())) return nullptr;
  return detail::cuda_hooks();
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  const detail::CudaHooks* hooks = cuda_copy_hooks(*this, src);  // expand() keeps the device
  if (hooks == nullptr) cpu::check_cpu("copy_", {this, &src});
  if (autograd::needs_grad({this, &src})) {
    autograd::check_inplace(*this, "copy_");
    {
      NoGradGuard no_grad;
      copy_(src);
    }
    // The old value is overwritten: no gradient flows to it; src gets the gradient summed
    // back to its shape.
    autograd::record(*this, "Copy", {this, &src}, {},
                     [ss = src.sizes().vec(), dt = src.dtype()](const autograd::variable_list& g,
                                                                const autograd::variable_list&) {
                       return autograd::variable_list{tl::zeros_like(g[0]),
                                                      autograd::sum_to(g[0], ss).to(dt)};
                     });
    if (is_view()) autograd::rebase_view_base(*this, *this);
    return *this;
  }
  check_no_internal_overlap("copy_", *this);
  check_no_partial_overlap("copy_", *this, src);
  Tensor s = src.sizes() == sizes() ? src : src.expand(sizes());
  if (hooks != nullptr) {
    hooks->copy(*this, s);
    bump_version();
    return *this;
  }
  TL_DISPATCH_ALL(dtype(), "copy_", [&]<typename D>() {
    TL_DISPATCH_ALL(s.dtype(), "copy_", [&]<typename S>() {
      if constexpr (std::is_same_v<D, S>) {
        if (is_contiguous() && s.is_contiguous()) {
          if (numel() > 0 && data_ptr() != s.data_ptr())
            std::memmove(data_ptr(), s.data_ptr(), nbytes());
          return;
        }
      }
      cpu::unary_kernel<D, S>(*this, s, [](S v) { return cpu::convert<D>(v); });
    });
  });
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  const detail::CudaHooks* hooks = defined() && is_cuda() ? detail::cuda_hooks() : nullptr;
  if (hooks == nullptr) cpu::check_cpu("fill_", {this});
  check_no_internal_overlap("fill_", *this);
  if (hooks != nullptr) {
    hooks->fill(*this, value);
    bump_version();
    return *this;
  }
  TL_DISPATCH_ALL(dtype(), "fill_", [&]<typename T>() {
    const T v = value.to<T>();
    cpu::StridedIter<1> it(sizes(), {this});
    it.parallel_for_each_row([&](char** p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
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

Tensor Tensor::to(ScalarType dtype, bool copy) const { return to(device(), dtype, copy); }
Tensor Tensor::to(Device device, bool copy) const { return to(device, dtype(), copy); }
Tensor Tensor::to(TensorOptions options, bool copy) const {
  return to(options.device(), options.has_dtype() ? options.dtype() : dtype(), copy);
}

Tensor Tensor::to(Device device, ScalarType dtype, bool copy) const {
  if (!copy && dtype == this->dtype() && device.resolved() == this->device()) return *this;
  Tensor out = detail::make_tensor(sizes(), dtype, device, "to");
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  autograd::record(out, "ToCopy", {this}, {}, [dt = this->dtype()](const autograd::variable_list& g,
                                                                    const autograd::variable_list&) {
    return autograd::variable_list{g[0].to(dt)};
  });
  return out;
}

}  // namespace tl
