// DeviceStats: the caching allocator's counters, mirroring PyTorch's memory_stats(). See
// docs/allocator.md for what each one means and when it moves.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "profiler/events/events.h"

namespace tl::memory {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // sum of all increases
  int64_t freed = 0;      // sum of all decreases

  void increase(int64_t n) {
    current += n;
    allocated += n;
    peak = current > peak ? current : peak;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() {
    allocated = 0;
    freed = 0;
  }
  friend bool operator==(const Stat&, const Stat&) = default;
};

enum class StatType : uint8_t { all = 0, small_pool = 1, large_pool = 2 };
inline constexpr size_t kNumStatTypes = 3;
using StatArray = std::array<Stat, kNumStatTypes>;

inline StatType stat_type_for(tidemark::events::Pool pool) {
  return pool == tidemark::events::Pool::small ? StatType::small_pool : StatType::large_pool;
}

struct DeviceStats {
  StatArray allocation;            // blocks handed to callers and not yet freed by them
  StatArray segment;               // segments obtained from the device
  StatArray active;                // allocated, or freed with stream uses still pending
  StatArray inactive_split;        // free pieces of split (non-expandable) segments
  StatArray allocated_bytes;       // rounded sizes of `allocation`
  StatArray reserved_bytes;        // bytes of `segment` (plus mapped expandable pages)
  StatArray active_bytes;          // rounded sizes of `active`
  StatArray inactive_split_bytes;  // sizes of `inactive_split`
  StatArray requested_bytes;       // the callers' original sizes of `allocation`

  Stat oversize_allocations;  // allocations of >= max_split_size
  Stat oversize_segments;     // segments of >= max_split_size

  int64_t num_alloc_retries = 0;     // failed segment allocations retried after freeing the cache
  int64_t num_ooms = 0;              // OutOfMemoryErrors thrown
  int64_t num_sync_all_streams = 0;  // waits for every pending event (retry, empty_cache, ...)
  int64_t num_device_alloc = 0;      // raw segment allocations and page maps
  int64_t num_device_free = 0;       // raw segment frees and page unmaps
  int64_t max_split_size = -1;       // bytes; -1 = unlimited

  void reset_peak();
  void reset_accumulated();
  friend bool operator==(const DeviceStats&, const DeviceStats&) = default;
};

/// PyTorch's flat memory_stats() map: "allocated_bytes.all.current",
/// "reserved_bytes.large_pool.peak", "oversize_allocations.freed", "num_ooms", ...
std::map<std::string, int64_t> flat_stats(const DeviceStats& stats);

}  // namespace tl::memory
