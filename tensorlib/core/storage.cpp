#include "tensorlib/core/storage.h"

#include <atomic>

#include "tensorlib/core/cuda_hooks.h"

namespace tl {

namespace ev = tidemark::events;

namespace {
std::atomic<uint64_t> g_next_storage_id{1};

void emit_storage(ev::Kind kind, const StorageImpl& s) {
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = kind;
  e.device = s.device().event_id();
  e.storage = {s.id(), reinterpret_cast<uint64_t>(s.data()), s.nbytes()};
  ev::dispatch(e);
}
}  // namespace

StorageImpl::StorageImpl(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device.resolved()), id_(g_next_storage_id.fetch_add(1)) {
  if (nbytes > 0) {
    // CUDA storages come from the current stream's pool (tensorlib/core/cuda_hooks.cpp).
    const detail::CudaHooks* hooks = device_.is_cuda() ? detail::cuda_hooks() : nullptr;
    data_ = hooks != nullptr ? hooks->allocate(device_, nbytes)
                             : memory::get_allocator(device_)->allocate(nbytes);
  }
  emit_storage(ev::Kind::storage_create, *this);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device,
                         std::function<void(void*)> deleter)
    : nbytes_(nbytes),
      device_(device.resolved()),
      id_(g_next_storage_id.fetch_add(1)),
      deleter_(std::move(deleter)) {
  data_.ptr = data;
  data_.size = nbytes;
  emit_storage(ev::Kind::storage_create, *this);
}

StorageImpl::~StorageImpl() {
  emit_storage(ev::Kind::storage_release, *this);
  if (data_.owner) {
    data_.owner->deallocate(data_);
  } else if (deleter_) {
    deleter_(data_.ptr);
  }
}

}  // namespace tl
