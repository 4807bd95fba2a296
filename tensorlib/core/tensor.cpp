#include "tensorlib/core/tensor.h"

#include <cstring>

#include "profiler/events/events.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/autograd/node.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/cpu/loops.h"

namespace tl {

namespace ev = tidemark::events;

namespace {
std::atomic<uint64_t> g_next_tensor_id{1};
}

TensorImpl::TensorImpl(Storage storage, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                       int64_t storage_offset, ScalarType dtype)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      storage_offset_(storage_offset),
      dtype_(dtype),
      id_(g_next_tensor_id.fetch_add(1)),
      version_(std::make_shared<VersionCounter>()),
      inference_(autograd::is_inference_mode_enabled()) {
  TL_INTERNAL_ASSERT(sizes_.size() == strides_.size());
  refresh();
}

TensorImpl::~TensorImpl() {
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = ev::Kind::tensor_release;
  e.device = storage_->device().event_id();
  e.tensor = {};
  e.tensor.tensor_id = id_;
  e.tensor.storage_id = storage_->id();
  e.tensor.base_id = base_ ? base_->id() : 0;
  ev::dispatch(e);
}

void TensorImpl::set_origin(const char* op, std::shared_ptr<TensorImpl> base) {
  op_ = op;
  if (base) {
    // Note [Views and version counters]: base is the root, the counter is shared.
    base_ = base->base_ ? base->base_ : std::move(base);
    version_ = base_->version_;
  }
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = ev::Kind::tensor_create;
  e.device = storage_->device().event_id();
  e.tensor = {};
  e.tensor.tensor_id = id_;
  e.tensor.storage_id = storage_->id();
  e.tensor.base_id = base_ ? base_->id() : 0;
  e.tensor.sizes = sizes_;
  e.tensor.strides = strides_;
  e.tensor.storage_offset = storage_offset_;
  e.tensor.dtype = dtype_name(dtype_);
  e.tensor.op = op_;
  ev::dispatch(e);
}

void TensorImpl::set_sizes_and_strides(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                                       int64_t storage_offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  storage_offset_ = storage_offset;
  refresh();
}

void TensorImpl::refresh() {
  numel_ = detail::numel_of(sizes_);
  // Contiguous: row-major strides, ignoring dims of size 1 (as PyTorch).
  is_contiguous_ = true;
  if (numel_ == 0) return;
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      is_contiguous_ = false;
      return;
    }
    expected *= sizes_[i];
  }
}

int64_t Tensor::size(int64_t d) const {
  TL_CHECK(dim() > 0, "size(", d, "): a 0-dim tensor has no dimensions");
  return sizes()[detail::wrap_dim(d, dim())];
}

int64_t Tensor::stride(int64_t d) const {
  TL_CHECK(dim() > 0, "stride(", d, "): a 0-dim tensor has no dimensions");
  return strides()[detail::wrap_dim(d, dim())];
}

void* Tensor::data_ptr() const {
  TL_CHECK(defined(), "data_ptr() called on an undefined tensor");
  char* base = static_cast<char*>(storage()->data());
  if (base == nullptr) return nullptr;
  return base + storage_offset() * static_cast<int64_t>(element_size());
}

// Note [Sync points on the CPU]
// item() is where a GPU program waits for the device: the value must exist on the host before
// the call returns. It is reported as a `sync` of kind `item` on every backend: on the CPU
// the wait is the (near-zero) time of reading the value, but the event still marks the place
// where the same program would stall a GPU once per call, so `tidemark syncs` and the
// sync-in-loop diagnosis work on CPU runs too (docs/recording.md).
Scalar Tensor::item() const {
  TL_CHECK(numel() == 1, "a Tensor with ", numel(), " elements cannot be converted to Scalar");
  namespace ev = tidemark::events;
  const bool record = ev::enabled();
  const uint64_t t0 = record ? ev::now_ns() : 0;
  Scalar v;
  if (is_cpu()) {
    v = TL_DISPATCH_ALL(dtype(), "item", [&]<typename T>() -> Scalar {
      return Scalar(*static_cast<const T*>(data_ptr()));
    });
  } else {
    // On a GPU the wait is real: the copy of the element waits for the stream's queued work.
    const detail::CudaHooks* hooks = detail::cuda_hooks();
    TL_CHECK(hooks != nullptr, "item: the CUDA backend is not available in this build");
    v = TL_DISPATCH_ALL(dtype(), "item", [&]<typename T>() -> Scalar {
      T value{};
      hooks->read_scalar(*this, &value);
      return Scalar(value);
    });
  }
  if (record) {
    ev::Event e;
    e.kind = ev::Kind::sync;
    e.device = device().event_id();
    e.ts_ns = ev::now_ns();
    e.sync = {ev::SyncKind::item, 0, e.ts_ns - t0};
    ev::dispatch(e);
  }
  return v;
}

std::string Tensor::toString() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

}  // namespace tl
