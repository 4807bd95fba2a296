// What a Storage needs from memory: an Allocator per device that hands out DataPtrs.
// The caching allocator (caching_allocator.h) implements it for every device; backends
// register theirs (the CUDA backend does so at load time, as c10's SetAllocator).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensorlib/base/device.h"

namespace tl::memory {

class Allocator;

// An allocation: the data pointer plus what the allocator needs to take it back.
struct DataPtr {
  void* ptr = nullptr;
  void* ctx = nullptr;  // allocator-private (the caching allocator's Block*)
  Allocator* owner = nullptr;
  size_t size = 0;  // requested bytes
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws tl::OutOfMemoryError when the device cannot satisfy the request.
  virtual DataPtr allocate(size_t nbytes) = 0;
  virtual void deallocate(const DataPtr& p) noexcept = 0;
};

// The allocator for a device (index resolved, CPU -> cpu:0). Throws tl::Error for a device
// type no backend has registered ("CUDA backend not available in this build").
Allocator* get_allocator(Device device);

using AllocatorFactory = Allocator* (*)(Device::Index index);
// Called once by a backend at load time.
void register_allocator_factory(DeviceType type, AllocatorFactory factory);

}  // namespace tl::memory
