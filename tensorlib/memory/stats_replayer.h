// StatsReplayer: rebuilds the caching allocator's statistics from its events alone. The
// replay tests check it against the allocator after every operation; the profiler uses it
// to cross-check a trace. Replay must start before the allocator's first event.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "profiler/events/events.h"
#include "tensorlib/memory/stats.h"

namespace tl::memory {

class StatsReplayer {
 public:
  /// Applies one event; kinds the allocator does not emit are ignored.
  void on_event(const tidemark::events::Event& e);

  /// The replayed statistics of `device` (zero for a device with no events). Exact for
  /// allocation, allocated_bytes, requested_bytes, active, active_bytes, segment,
  /// reserved_bytes, inactive_split, inactive_split_bytes (current, peak, allocated, freed,
  /// per pool), num_ooms, num_alloc_retries, num_device_alloc and num_device_free. Not
  /// derivable from events: oversize_*, num_sync_all_streams, max_split_size (left at zero).
  DeviceStats stats(tidemark::events::DeviceId device) const;

 private:
  struct SegmentState {
    uint64_t size = 0;  // bytes; mapped bytes for an expandable segment
    bool small = false;
    bool expandable = false;
    std::map<uint64_t, uint64_t> active;  // address -> size of blocks alloc'd, not completed
  };
  struct DeviceState {
    DeviceStats stats;
    std::map<uint64_t, SegmentState> segments;  // by segment address
  };

  void on_alloc(DeviceState& d, const tidemark::events::BlockInfo& b);
  void on_free_completed(DeviceState& d, const tidemark::events::BlockInfo& b);

  std::map<std::pair<int, int>, DeviceState> devices_;
};

}  // namespace tl::memory
