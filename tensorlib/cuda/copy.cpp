// The CUDA backend's side of the core: item(), storage allocation, pinned memory and the
// allocator registration (tensorlib/core/cuda_hooks.h), and the copy and fill entries of its
// kernel table (core/kernels.h).
//
// Note [CUDA copies]
// Contiguous copies of one dtype are one cudaMemcpyAsync on the current stream of the CUDA
// side (the destination's for device-to-device). Strided or converting copies between tensors
// on one device are a kernel (launch_copy, elementwise.cu); host to device, the host side is
// made contiguous, uploaded, and the kernel scatters and converts on the device. Device to
// host and across two devices stage through the host: the span of storage the CUDA tensor
// covers is copied whole and the CPU copy does the strided or converting part.
// A copy is blocking unless tl::cuda::copy_/to asked for non_blocking and the host side is
// pinned. Each transfer emits `memcpy` (direction, bytes, stream, pinned, async); a blocking
// copy to the host also emits `sync` (copy_to_host) with the time the host waited. item()
// emits its own `sync` (item) instead (tensor.cpp).
#include <cmath>
#include <memory>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/memory.h"
#include "tensorlib/cuda/cuda.h"
#include "tensorlib/cuda/cuda_device.h"
#include "tensorlib/cuda/cuda_internal.h"
#include "tensorlib/memory/caching_allocator.h"

namespace tl::cuda {

namespace ev = tidemark::events;

namespace detail {

namespace {

thread_local bool t_non_blocking = false;

struct NonBlockingScope {
  explicit NonBlockingScope(bool on) : previous(t_non_blocking) { t_non_blocking = on; }
  ~NonBlockingScope() { t_non_blocking = previous; }
  bool previous;
};

Device cuda_device(int index) {
  return Device(kCUDA, static_cast<Device::Index>(index));
}

enum class HostWait { none, copy_to_host, data_dependent };

}  // namespace

// kernels.cpp
void copy_on_device(const Tensor& dst, const Tensor& src);
void fill_on_device(const Tensor& t, const Scalar& value);
const tl::detail::Kernels* op_kernels();

namespace {

// One transfer of `bytes` between `host` (or a second device pointer) and `dev` on CUDA device
// `index`'s current stream.
void transfer(void* dst, const void* src, size_t bytes, ev::CopyDirection dir, int index,
              const void* host_block, HostWait wait) {
  if (bytes == 0) return;
  DeviceGuard guard(index);
  const uint64_t stream = current_stream_id(index);
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  const bool pinned = dir != ev::CopyDirection::device_to_device && is_pinned_ptr(host_block);
  const bool async = dir == ev::CopyDirection::device_to_device || (t_non_blocking && pinned);
  const uint64_t t0 = ev::enabled() ? ev::now_ns() : 0;
  const cudaMemcpyKind kind = dir == ev::CopyDirection::host_to_device   ? cudaMemcpyHostToDevice
                              : dir == ev::CopyDirection::device_to_host ? cudaMemcpyDeviceToHost
                                                                         : cudaMemcpyDefault;
  TL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  emit_memcpy(cuda_device(index), dir, bytes, stream, pinned, async);
  if (async) {
    if (pinned) pinned_record_use(const_cast<void*>(host_block), index, stream);
    return;
  }
  TL_CUDA_CHECK(cudaStreamSynchronize(s));
  if (wait != HostWait::none) {
    emit_sync(
        cuda_device(index),
        wait == HostWait::copy_to_host ? ev::SyncKind::copy_to_host : ev::SyncKind::data_dependent,
        stream, t0);
  }
}

}  // namespace

// The host waits for a size only the device knows (nonzero, masked_select): `memcpy` and
// `sync` (data_dependent).
void read_data_dependent(void* host, const void* dev, size_t bytes, int index) {
  transfer(host, dev, bytes, ev::CopyDirection::device_to_host, index, host,
           HostWait::data_dependent);
}

namespace {

// The element range [lo, hi] of its storage that `t` covers (strides are non-negative).
std::pair<int64_t, int64_t> span(const Tensor& t) {
  int64_t lo = t.storage_offset(), hi = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] == 0) return {lo, lo - 1};
    const int64_t ext = (t.sizes()[d] - 1) * t.strides()[d];
    (ext < 0 ? lo : hi) += ext;
  }
  return {lo, hi};
}

char* storage_base(const Tensor& t) {
  return static_cast<char*>(t.storage()->data());
}

// A CPU tensor holding the values of CUDA tensor `t` (its dtype, its strides over a copy of
// its storage span).
Tensor download(const Tensor& t) {
  const int index = t.device().resolved().index();
  if (t.is_contiguous()) {
    Tensor h = tl::empty(t.sizes(), TensorOptions().dtype(t.dtype()));
    transfer(h.data_ptr(), t.data_ptr(), t.nbytes(), ev::CopyDirection::device_to_host, index,
             h.storage()->data(), HostWait::copy_to_host);
    return h;
  }
  auto [lo, hi] = span(t);
  Tensor h = tl::empty({hi - lo + 1}, TensorOptions().dtype(t.dtype()));
  const auto es = static_cast<int64_t>(t.element_size());
  transfer(h.data_ptr(), storage_base(t) + lo * es, static_cast<size_t>((hi - lo + 1) * es),
           ev::CopyDirection::device_to_host, index, h.storage()->data(), HostWait::copy_to_host);
  return tl::as_strided(h, t.sizes(), t.strides(), t.storage_offset() - lo);
}

}  // namespace

void copy_tensors(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  NoGradGuard no_grad;
  const bool same = dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous();
  if (same && dst.is_cuda() && src.is_cuda()) {
    const int di = dst.device().resolved().index(), si = src.device().resolved().index();
    if (di != si) {  // order the source device's queued work before the copy
      Event e(false);
      e.record(current_stream(cuda_device(si)));
      e.wait(current_stream(cuda_device(di)));
    }
    transfer(dst.data_ptr(), src.data_ptr(), dst.nbytes(), ev::CopyDirection::device_to_device, di,
             nullptr, HostWait::none);
    if (di != si) {  // the source's block may be reused on its stream only after the copy read it
      Event read(false);
      read.record(current_stream(cuda_device(di)));
      read.wait(current_stream(cuda_device(si)));
    }
    return;
  }
  if (same && dst.is_cuda()) {
    transfer(dst.data_ptr(), src.data_ptr(), dst.nbytes(), ev::CopyDirection::host_to_device,
             dst.device().resolved().index(), src.storage()->data(), HostWait::none);
    return;
  }
  if (same && src.is_cuda()) {
    transfer(dst.data_ptr(), src.data_ptr(), dst.nbytes(), ev::CopyDirection::device_to_host,
             src.device().resolved().index(), dst.storage()->data(), HostWait::copy_to_host);
    return;
  }
  if (dst.is_cuda() && src.is_cuda() && dst.device().resolved() == src.device().resolved()) {
    copy_on_device(dst, src);
    return;
  }
  if (dst.is_cuda() && src.is_cpu()) {  // upload as is, then scatter and convert on the device
    Tensor c = src.contiguous();
    Tensor staged = tl::empty(c.sizes(), TensorOptions().dtype(c.dtype()).device(dst.device()));
    transfer(staged.data_ptr(), c.data_ptr(), c.nbytes(), ev::CopyDirection::host_to_device,
             dst.device().resolved().index(), c.storage()->data(), HostWait::none);
    copy_on_device(dst, staged);
    return;
  }
  // Staged through the host (Note [CUDA copies]); blocking.
  NonBlockingScope blocking(false);
  Tensor h = src.is_cuda() ? download(src) : src;
  if (dst.is_cpu()) {
    tl::detail::copy(dst, h);
    return;
  }
  const int index = dst.device().resolved().index();
  if (dst.is_contiguous()) {
    Tensor c = h.to(dst.dtype()).contiguous();
    transfer(dst.data_ptr(), c.data_ptr(), c.nbytes(), ev::CopyDirection::host_to_device, index,
             c.storage()->data(), HostWait::none);
    return;
  }
  Tensor staged = download(dst);  // the destination's span, written in place on the host
  tl::detail::copy(staged, h);
  auto [lo, hi] = span(dst);
  const auto es = static_cast<int64_t>(dst.element_size());
  const char* from = storage_base(staged);  // the span's copy starts its storage
  transfer(storage_base(dst) + lo * es, from, static_cast<size_t>((hi - lo + 1) * es),
           ev::CopyDirection::host_to_device, index, staged.storage()->data(), HostWait::none);
}

namespace {

bool is_zero(const Scalar& v) {
  if (v.is_floating_point()) {
    const double d = v.to<double>();
    return d == 0.0 && !std::signbit(d);
  }
  return v.to<double>() == 0.0;
}

}  // namespace

void fill_tensor(const Tensor& t, const Scalar& value) {
  if (t.numel() == 0) return;
  if (t.is_contiguous() && is_zero(value)) {
    const int index = t.device().resolved().index();
    DeviceGuard guard(index);
    TL_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(),
                                  reinterpret_cast<cudaStream_t>(current_stream_id(index))));
    return;
  }
  fill_on_device(t, value);
}

namespace {

class Hooks final : public tl::detail::CudaHooks {
 public:
  void read_scalar(const Tensor& t, void* out) const override {
    transfer(out, t.data_ptr(), t.element_size(), ev::CopyDirection::device_to_host,
             t.device().resolved().index(), out, HostWait::none);
  }

  memory::DataPtr allocate(Device device, size_t nbytes) const override {
    const int index = device.resolved().index();
    memory::CachingAllocator* a = memory::caching_allocator(device);
    return a->allocate(nbytes, current_stream_id(index));
  }

  Tensor pin_memory(const Tensor& t) const override {
    void* p = pinned_alloc(t.nbytes());
    Tensor out = tl::from_blob(
        p, t.sizes(), [](void* q) { pinned_free(q); }, TensorOptions().dtype(t.dtype()));
    tl::detail::copy(out, t);  // a new tensor: version 0 (Note [Version counter])
    return out;
  }

  bool is_pinned(const Tensor& t) const override { return is_pinned_ptr(t.storage()->data()); }

  bool is_available() const override { return tl::cuda::is_available(); }

  const tl::detail::Kernels* kernels() const override { return op_kernels(); }
};

memory::Allocator* make_cuda_allocator(Device::Index index) {
  TL_CHECK(index < device_count(), "CUDA device cuda:", static_cast<int>(index),
           " is not available (", device_count(), " CUDA device(s) found",
           device_count() == 0 ? "; no driver or no GPU on this machine" : "", ")");
  auto device = std::make_unique<CudaDevice>(index);
  // Leaked on purpose, as the CPU allocator: no cudaFree runs during static destruction.
  return new memory::CachingAllocator(std::move(device), memory::AllocatorConfig::from_env());
}

}  // namespace

const tl::detail::CudaHooks* init_backend() {
  static const Hooks hooks;
  memory::register_allocator_factory(kCUDA, make_cuda_allocator);
  return &hooks;
}

}  // namespace detail

void copy_(Tensor& dst, const Tensor& src, bool non_blocking) {
  detail::NonBlockingScope scope(non_blocking);
  dst.copy_(src);
}

Tensor to(const Tensor& t, Device device, bool non_blocking) {
  detail::NonBlockingScope scope(non_blocking);
  return t.to(device);
}

}  // namespace tl::cuda
