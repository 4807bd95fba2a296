// FakeDevice: a device for tests. Addresses are invented (no memory behind them), handed out
// in increasing order with gaps, so layouts are exact and predictable; events complete only
// when the test says so; raw calls are counted and can be made to fail.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tensorlib/memory/device_interface.h"

namespace tl::memory {

class FakeDevice final : public DeviceInterface {
 public:
  static constexpr uintptr_t kFirstAddress = uintptr_t{1} << 40;  // 1 TiB
  static constexpr uintptr_t kAddressGap = uintptr_t{1} << 30;    // 1 GiB between ranges

  explicit FakeDevice(size_t capacity = size_t{1} << 34 /* 16 GiB */,
                      Device device = Device(kCUDA, 0));

  // The address the n-th range (0-based, segments and reserved ranges alike) gets when the
  // earlier ones had the given sizes: each starts at kFirstAddress or at the previous range's
  // end rounded up to a GiB, plus one GiB.
  static uintptr_t next_address(uintptr_t previous, size_t previous_size);

  Device device() const override { return device_; }
  void* raw_alloc(size_t nbytes) override;
  void raw_free(void* ptr, size_t nbytes) override;
  MemoryInfo memory_info() override;

  EventId record_event(StreamId stream) override;
  bool query_event(EventId event) override;
  void synchronize_event(EventId event) override;
  void destroy_event(EventId event) override;
  void synchronize_device() override;

  bool supports_expandable() const override { return expandable_; }
  void* reserve_range(size_t nbytes) override;
  bool map(void* base, size_t offset, size_t nbytes) override;
  void unmap(void* base, size_t offset, size_t nbytes) override;
  void release_range(void* base, size_t nbytes) override;

  // ---- Test controls ------------------------------------------------------------------
  void set_capacity(size_t bytes);
  void set_supports_expandable(bool on) { expandable_ = on; }
  /// The next `n` raw_alloc/map calls fail as if the device were full.
  void fail_next_allocs(int n);
  void complete_event(EventId event);
  void complete_all();
  /// The next raw_alloc or reserve_range returns `addr` instead of a new address when
  /// [addr, addr + n) overlaps no live segment or range. One hint, taken or dropped by that
  /// next call: a replay hands out the addresses a recorded trace holds, so best fit breaks
  /// ties among equal blocks as it did then.
  void prefer_address(uintptr_t addr);

  // ---- Observations -------------------------------------------------------------------
  struct Counters {
    int raw_alloc = 0;  // successful raw_alloc calls
    int raw_free = 0;
    int failed_alloc = 0;  // raw_alloc or map calls that returned failure
    int map = 0;
    int unmap = 0;
    int events_recorded = 0;
    int event_syncs = 0;
    int device_syncs = 0;
  };
  Counters counters() const;
  size_t bytes_in_use() const;  // raw segments plus mapped pages
  /// Recorded events not yet completed, with their streams, in record order.
  std::vector<std::pair<EventId, StreamId>> pending_events() const;
  size_t live_events() const;  // recorded and not destroyed
  /// The id the next record_event returns (ids count up from 1).
  EventId next_event_id() const;

 private:
  bool take(size_t nbytes);  // requires mu_
  // The address of a new segment or range of `nbytes`: the preferred one when free, else the
  // next in order. Requires mu_.
  uintptr_t place(size_t nbytes);

  Device device_;
  mutable std::mutex mu_;
  size_t capacity_;
  size_t in_use_ = 0;
  bool expandable_ = true;
  int fail_next_ = 0;
  uintptr_t last_address_ = 0;
  size_t last_size_ = 0;
  uintptr_t preferred_ = 0;               // 0: none
  std::map<uintptr_t, size_t> segments_;  // live raw allocations
  std::map<uintptr_t, size_t> ranges_;    // live reserved ranges
  EventId next_event_ = 1;
  std::map<EventId, std::pair<StreamId, bool>> events_;  // id -> (stream, completed)
  Counters counters_;
};

}  // namespace tl::memory
