// CachingAllocator: PyTorch's CUDA caching allocator policy for one device, over any
// DeviceInterface (CUDA, host, fake). The policy is stated at the top of caching_allocator.cpp
// and in docs/allocator.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensorlib/memory/alloc_config.h"
#include "tensorlib/memory/allocator.h"
#include "tensorlib/memory/device_interface.h"
#include "tensorlib/memory/oom.h"
#include "tensorlib/memory/sizes.h"
#include "tensorlib/memory/snapshot.h"
#include "tensorlib/memory/stats.h"

namespace tl::memory {

class CachingAllocator final : public Allocator {
 public:
  /// Owns `device`. With config.expandable_segments on a device that does not support them,
  /// the allocator uses ordinary segments.
  explicit CachingAllocator(std::unique_ptr<DeviceInterface> device, AllocatorConfig config = {});
  /// Returns every segment to the device (blocks still allocated become dangling).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// `nbytes` on stream 0. Throws tl::OutOfMemoryError when the request cannot be met.
  DataPtr allocate(size_t nbytes) override;
  /// `nbytes` for use on `stream`; the block returns to that stream's pool when freed.
  /// A request of 0 bytes returns a null DataPtr without touching the allocator.
  DataPtr allocate(size_t nbytes, StreamId stream);
  void deallocate(const DataPtr& p) noexcept override;
  /// Marks `p` as used by `stream` too: on free its reuse waits for that stream's work
  /// (Note [Deferred frees] in caching_allocator.cpp).
  void record_stream(const DataPtr& p, StreamId stream);

  /// Waits for pending frees, then returns every cached segment with no live block to the
  /// device (and unmaps free pages of expandable segments).
  void empty_cache();
  /// Waits for every pending event and completes the deferred frees.
  void synchronize();

  DeviceStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  Snapshot snapshot() const;

  /// The largest cached (free, reusable) block of either pool, in bytes; 0 when none. What the
  /// largest request served without a new segment could be.
  size_t largest_cached_block() const;

  /// This allocator's events go to `sink` alone, not to the installed sinks (null: back to
  /// those), so a replay can watch its own allocator while the process records or other
  /// replays run. The events carry no time (ts_ns 0) and a sequence of this allocator's own;
  /// `sink` must outlive the allocator or be reset first.
  void set_event_sink(tidemark::events::Sink* sink);

  /// Caps reserved memory at fraction x total device memory (0 <= fraction <= 1).
  void set_memory_fraction(double fraction);
  const AllocatorConfig& config() const;
  Device device() const;
  /// The device the allocator draws from (tests reach the FakeDevice's controls through it).
  DeviceInterface& device_interface();

  /// The block size a request of `nbytes` gets under `config` (512 B rounding, power-of-two
  /// divisions).
  static size_t round_size(size_t nbytes, const AllocatorConfig& config);
  /// The segment size requested from the device for a block of `rounded` bytes.
  static size_t allocation_size(size_t rounded);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tl::memory
