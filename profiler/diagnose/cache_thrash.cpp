// cache-thrash (profiler/diagnose/diagnose.h): the allocator returning and reserving its
// segments over and over. docs/diagnoses.md gives its evidence and thresholds.
#include <string>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

constexpr int64_t kMinSegmentFrees = 10;
constexpr int64_t kChurnFactor = 2;  // freed at least twice the reserved peak

}  // namespace

// Note [Cache thrash]: a caching allocator reserves a segment once and serves every later
// request from it. It gives segments back only when told to (empty_cache) or when a device
// allocation fails and it frees its cached blocks to retry (PyTorch's release of cached blocks
// before an OOM; tensorlib's allocator does the same). A run whose segment frees add up to at
// least kChurnFactor times its reserved peak, in at least kMinSegmentFrees frees, has paid for
// that memory over and over: each cudaFree synchronizes the device, and each segment
// reserved again is a cudaMalloc. The evidence says which it was: the empty_cache() calls
// in the trace, and the streams the allocations were made on -- a block freed on one stream is
// not reused for another, so several allocation streams each build a cache of their own
// until the device is full and the allocator flushes them all.
void detect_cache_thrash(const Trace& trace, Diagnosis& out) {
  for (const DeviceRef& dev : trace.devices()) {
    const store::RowTotals released =
        store::segment_totals(trace.reader(), {.device = dev.id, .freed = true});
    const auto frees = static_cast<int64_t>(released.rows);
    if (frees < kMinSegmentFrees) continue;
    const int64_t freed = released.bytes;
    const std::optional<store::Peak> reserved = peak(trace, dev.id, store::Curve::reserved);
    if (!reserved || reserved->bytes <= 0 || freed < kChurnFactor * reserved->bytes) continue;
    const auto reservations =
        static_cast<int64_t>(store::segment_count(trace.reader(), {.device = dev.id}));
    const auto empty_caches =
        static_cast<int64_t>(store::allocator_events(trace.reader(), "empty_cache", dev.id).size());
    const auto streams = static_cast<int64_t>(store::allocation_streams(trace.reader(), dev.id));
    Finding f;
    f.id = "cache-thrash";
    f.device = dev.name;
    f.bytes = reserved->bytes;
    f.title = "the allocator gave back " + format_bytes(freed) + " in " + std::to_string(frees) +
              " segment frees and reserved it again, against a reserved peak of " +
              format_bytes(reserved->bytes);
    f.evidence = {{"segment frees", std::to_string(frees) + " (" + bytes_text(freed) + ")"},
                  {"segments reserved", std::to_string(reservations)},
                  {"reserved peak", bytes_text(reserved->bytes)},
                  {"empty_cache() calls", std::to_string(empty_caches)},
                  {"allocation streams", std::to_string(streams)}};
    std::string why;
    if (empty_caches > 0)
      why =
          "empty_cache() returns the cache the next iteration reserves again: call it once after "
          "the phase that "
          "needed the memory, or not at all. ";
    else {
      why =
          "With no empty_cache() call, these are the allocator's flushes after failed device "
          "allocations: the run "
          "is at the device's limit. ";
      f.severity = Severity::major;  // at the device's limit: memory decides (Note [Severity])
    }
    if (streams > 1)
      why +=
          "Blocks freed on one stream are not reused for another: allocate on one stream (share "
          "the copy streams "
          "instead of one per module or shard), or preallocate the buffers that move between "
          "them. ";
    f.fix = why +
            "Lowering the peak below the device's memory (smaller batches, fewer tensors in "
            "flight) stops "
            "the flushes.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
