// HostDevice: the caching allocator's memory source for CPU tensors. Segments are aligned host
// memory; with a capacity set, allocations beyond it fail exactly as a full GPU would, so OOM
// handling can be exercised on any machine (TL_HOST_CAPACITY, docs/allocator.md).
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>

#include "tensorlib/memory/device_interface.h"

namespace tl::memory {

class HostDevice final : public DeviceInterface {
 public:
  static constexpr size_t kAlignment = 512;  // bytes; matches the allocator's minimum block

  /// `capacity`: bytes the device may hand out (segments plus mapped pages); none = RAM size.
  explicit HostDevice(std::optional<size_t> capacity = std::nullopt);

  Device device() const override { return Device(kCPU, 0); }
  void* raw_alloc(size_t nbytes) override;
  void raw_free(void* ptr, size_t nbytes) override;
  MemoryInfo memory_info() override;

  // The host is synchronous: work is done when it is issued, so every event has completed.
  EventId record_event(StreamId) override { return 1; }
  bool query_event(EventId) override { return true; }
  void synchronize_event(EventId) override {}
  void destroy_event(EventId) override {}
  void synchronize_device() override {}

  bool supports_expandable() const override { return true; }
  void* reserve_range(size_t nbytes) override;
  bool map(void* base, size_t offset, size_t nbytes) override;
  void unmap(void* base, size_t offset, size_t nbytes) override;
  void release_range(void* base, size_t nbytes) override;

  std::optional<size_t> capacity() const { return capacity_; }
  size_t bytes_in_use() const;

 private:
  bool take(size_t nbytes);  // reserves `nbytes` of capacity; false when it would overflow
  void give_back(size_t nbytes);

  std::optional<size_t> capacity_;
  mutable std::mutex mu_;
  size_t in_use_ = 0;
};

}  // namespace tl::memory
