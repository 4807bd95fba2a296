// What the caching allocator needs from a device: raw segments, stream-ordered events, memory
// info and (optionally) virtual-memory mapping for expandable segments. Three implementations:
// HostDevice (aligned host memory), FakeDevice (tests decide when events complete) and, when
// the CUDA backend is built, a CUDA one (cudaMalloc, cudaEventRecord, cuMemMap).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensorlib/base/device.h"

namespace tl::memory {

using StreamId = uint64_t;  // cudaStream_t as an integer; 0 is the default stream
using EventId = uint64_t;   // an opaque handle the device hands out; never 0

struct MemoryInfo {
  size_t free = 0;   // bytes the device could still hand out (cudaMemGetInfo's `free`)
  size_t total = 0;  // device capacity
};

class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;

  /// The device this interface allocates on (index resolved).
  virtual Device device() const = 0;

  /// A new segment of `nbytes`; nullptr when the device is out of memory (never throws for OOM).
  virtual void* raw_alloc(size_t nbytes) = 0;
  /// Returns a segment from raw_alloc; `nbytes` is the size it was allocated with.
  virtual void raw_free(void* ptr, size_t nbytes) = 0;

  virtual MemoryInfo memory_info() = 0;

  /// Records an event on `stream` after the work queued so far (cudaEventRecord).
  virtual EventId record_event(StreamId stream) = 0;
  /// True once the work before the event has finished (cudaEventQuery == cudaSuccess).
  virtual bool query_event(EventId event) = 0;
  /// Blocks until the event has completed (cudaEventSynchronize).
  virtual void synchronize_event(EventId event) = 0;
  virtual void destroy_event(EventId event) = 0;
  /// Blocks until all work on every stream has finished (cudaDeviceSynchronize).
  virtual void synchronize_device() = 0;

  // ---- Expandable segments (cuMemAddressReserve / cuMemCreate+cuMemMap / cuMemUnmap) ------
  /// Whether reserve_range/map/unmap work on this device.
  virtual bool supports_expandable() const { return false; }
  /// Reserves `nbytes` of address space with no memory behind it; nullptr on failure.
  virtual void* reserve_range(size_t /*nbytes*/) { return nullptr; }
  /// Backs [base+offset, base+offset+nbytes) with memory; false when out of memory.
  virtual bool map(void* /*base*/, size_t /*offset*/, size_t /*nbytes*/) { return false; }
  /// Releases the memory behind a mapped range (the address space stays reserved).
  virtual void unmap(void* /*base*/, size_t /*offset*/, size_t /*nbytes*/) {}
  /// Gives back a range from reserve_range; everything in it must be unmapped.
  virtual void release_range(void* /*base*/, size_t /*nbytes*/) {}
};

}  // namespace tl::memory
