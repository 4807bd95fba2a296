// Storage: a reference-counted owner of one allocator block. Tensors and their views share
// one Storage; the block goes back to the allocator when the last of them dies.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensorlib/base/device.h"
#include "tensorlib/memory/allocator.h"

namespace tl {

class StorageImpl {
 public:
  // Allocates nbytes on `device` through its caching allocator.
  StorageImpl(size_t nbytes, Device device);
  // Wraps memory the caller owns (from_blob); `deleter` runs when the storage dies.
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t id() const { return id_; }
  // The allocator's handle, for record_stream and the profiler.
  const memory::DataPtr& data_ptr() const { return data_; }
  // What the block holds as the profiler was last told (tl::set_memory_category).
  tidemark::events::Category memory_category() const {
    return category_.load(std::memory_order_relaxed);
  }
  void set_memory_category(tidemark::events::Category c) {
    category_.store(c, std::memory_order_relaxed);
  }

 private:
  memory::DataPtr data_;
  size_t nbytes_;
  Device device_;
  uint64_t id_;
  std::function<void(void*)> deleter_;
  std::atomic<tidemark::events::Category> category_{tidemark::events::Category::unknown};
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace tl
