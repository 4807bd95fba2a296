// CUPTI Activity API: memory (MEMORY2, MEMORY_POOL), copies (MEMCPY, MEMSET) and waits
// (SYNCHRONIZATION) of the whole process, as events.
//
// Note [Activity buffers]
// CUPTI asks for buffers (buffer_requested: 4 MiB, 8-byte aligned, from a free list) and hands
// them back full on its own thread (buffer_completed). That thread only queues the buffer and
// counts the records CUPTI dropped; a parser thread of ours walks the records, turns them into
// events sorted by time and emits them to the recorder, then recycles the buffer. Flushes: every
// kFlushPeriod, forced at exit and on entry to cudaDeviceReset.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "profiler/events/events.h"

namespace tidemark::interpose::activity {

inline constexpr size_t kBufferBytes = 4 << 20;

// Turns activity records into events. Keeps the state that spans records: pool sizes, live
// segments (a release without a size), context -> device.
class Parser {
 public:
  // offset_ns: added to CUPTI timestamps to get the event clock (0 when CUPTI stamps records
  // with the event clock through the timestamp callback).
  explicit Parser(int64_t offset_ns = 0) : offset_(offset_ns) {}
  // An event and the correlation id of the record it came from (0: none), which joins it to
  // the call site of the CUDA call (Note [Call sites]).
  struct Parsed {
    events::Event event;
    uint32_t correlation = 0;
  };
  // Appends the events of one record; unknown kinds are ignored.
  void parse(const CUpti_Activity* record, std::vector<Parsed>& out);
  // Strings the events of the last parse() calls point to; clear once they were emitted.
  void clear_names() { names_.clear(); }
  // Counters (for the stats line and the tests).
  uint64_t records = 0, memsets = 0, ignored = 0;

 private:
  struct PoolKey {
    uint32_t device;
    uint64_t addr;
    auto operator<=>(const PoolKey&) const = default;
  };
  void parse_record(const CUpti_Activity* record, std::vector<events::Event>& out);
  uint64_t ts(uint64_t cupti_ns) const { return cupti_ns + static_cast<uint64_t>(offset_); }
  void reconcile_pool(uint32_t device, uint64_t pool, uint64_t size, uint64_t ts,
                      std::vector<events::Event>& out);
  int64_t offset_;
  std::vector<std::pair<PoolKey, uint64_t>> pools_;      // pool -> mapped bytes
  std::vector<std::pair<PoolKey, uint64_t>> segments_;   // live (device, addr) -> bytes
  std::vector<std::pair<uint32_t, uint32_t>> contexts_;  // context -> device
  std::vector<std::pair<uint32_t, std::pair<std::string, uint64_t>>> markers_;  // id -> start
  std::deque<std::string> names_;
  std::vector<events::Event> scratch_;
};

// Starts the parser thread (idempotent). With `with_cupti`, also subscribes to the Callback
// API (callbacks.h: call sites, virtual-memory mappings, the cudaDeviceReset flush), registers
// the buffer callbacks and enables the activity kinds; on failure prints one line naming the
// reason and returns false (the program runs on, untraced).
bool start(bool with_cupti) noexcept;
// Forced flush (when CUPTI is live), then waits until every queued buffer is parsed and
// emitted. Safe to call when not started.
void flush() noexcept;
// flush(), then stops the parser thread.
void stop() noexcept;

// The callbacks registered with CUPTI (Note [Activity buffers]); tests call them directly.
void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept;
void buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                      size_t valid) noexcept;

// Records CUPTI said it dropped, as counted so far.
uint64_t dropped_records() noexcept;

}  // namespace tidemark::interpose::activity
