// The torch.cuda memory API for tensorlib devices: statistics, snapshots and cache control
// of a device's caching allocator (docs/allocator.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tensorlib/base/device.h"
#include "tensorlib/memory/snapshot.h"

namespace tl {

namespace memory {
class CachingAllocator;
/// The device's allocator as a CachingAllocator; throws tl::Error when a backend registered
/// some other kind of allocator.
CachingAllocator* caching_allocator(Device device);
}  // namespace memory

/// Bytes handed to tensors and not yet freed (allocated_bytes.all.current).
int64_t memory_allocated(Device device = Device("cpu"));
int64_t max_memory_allocated(Device device = Device("cpu"));
/// Bytes held by the caching allocator (reserved_bytes.all.current).
int64_t memory_reserved(Device device = Device("cpu"));
int64_t max_memory_reserved(Device device = Device("cpu"));
/// Sets every peak statistic to its current value.
void reset_peak_memory_stats(Device device = Device("cpu"));
/// PyTorch's flat memory_stats() map ("allocated_bytes.all.current", "num_ooms", ...).
std::map<std::string, int64_t> memory_stats(Device device = Device("cpu"));
memory::Snapshot memory_snapshot(Device device = Device("cpu"));
/// Returns cached memory that no tensor uses to the device.
void empty_cache(Device device = Device("cpu"));
/// Waits for the device's pending frees (and, on the host, nothing else).
void synchronize(Device device = Device("cpu"));
/// Caps the allocator's reserved memory at fraction x device capacity.
void set_per_process_memory_fraction(double fraction, Device device = Device("cpu"));

}  // namespace tl
