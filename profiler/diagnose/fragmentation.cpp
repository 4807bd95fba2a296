// fragmentation (profiler/diagnose/diagnose.h): reserved memory far above allocated at the
// peak, or at an out-of-memory error. It reads the segments, allocations, allocator_events and
// memory_lod tables (docs/trace-format.md); docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <optional>
#include <string>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// The device's curves right after the event `seq` (level 0 of memory_lod).
struct CurvesAt {
  int64_t allocated = 0, reserved = 0;
};
CurvesAt curves_at_seq(const Trace& trace, int64_t device, uint64_t seq) {
  CurvesAt c;
  if (std::optional<store::LodRow> r = trace.reader().lod_at_seq(device, seq))
    c = {r->allocated, r->reserved};
  return c;
}

// The stack of the first allocation on the device after event `seq` (the one a new segment
// was reserved for), 0 when none.
uint64_t next_alloc_stack(const Trace& trace, int64_t device, uint64_t seq) {
  const std::optional<store::AllocationSpan> next = store::first_allocation(
      trace.reader(), {.device = device, .after_seq = seq}, store::AllocationOrder::seq);
  return next ? next->stack_id : 0;
}

// Note [Fragmentation], shape (3): at the allocated peak -- the moment the run needed the most
// -- the allocator held at least kStrandedShare of its reserved memory cached but free, at
// least kStrandedFloor, and no single free block held a quarter of it: the free memory was
// spread over many segments that the peak's requests could not use, so the device needed that
// much more than the program did. (A trace whose segments were all reserved before it began,
// such as a snapshot recorded after warm-up, shows this though it has no segment events.)
constexpr int64_t kStrandedFloor = 1LL << 30;  // bytes
constexpr double kStrandedShare = 0.10;

void stranded_at_peak(const Trace& trace, const DeviceRef& dev, const store::Peak& allocated,
                      const std::string& settings, Diagnosis& out) {
  const CurvesAt at = curves_at_seq(trace, dev.id, allocated.seq);
  const int64_t stranded = at.reserved - allocated.bytes;
  if (stranded < kStrandedFloor ||
      static_cast<double>(stranded) < kStrandedShare * static_cast<double>(at.reserved))
    return;
  const SegmentsAt seg = segments_at(trace, dev.id, allocated.ts_ns);
  if (4 * seg.largest_free > stranded) return;
  Finding f;
  f.id = "fragmentation";
  f.device = dev.name;
  f.bytes = stranded;
  f.title = format_bytes(stranded) + " of the " + format_bytes(at.reserved) +
            " reserved was cached but free at the allocated peak, spread over " +
            std::to_string(seg.count) + " segments (the largest free block " +
            format_bytes(seg.largest_free) + ")";
  f.evidence = {
      {"peak allocated", bytes_text(allocated.bytes) + " at " + trace.time_text(allocated.ts_ns)},
      {"reserved at the allocated peak", bytes_text(at.reserved)},
      {"cached but free at the peak", bytes_text(stranded)},
      {"segments at the peak", std::to_string(seg.count)},
      {"largest cached free block at the peak", bytes_text(seg.largest_free)},
      {"allocator settings", settings.empty() ? "(defaults)" : settings}};
  f.fix = settings.find("expandable_segments:True") != std::string::npos
              ? "Expandable segments are already on: cap block splitting with max_split_size_mb:N "
                "(TL_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF), or allocate the largest tensors first."
              : std::string(kFragmentationFix);
  out.findings.push_back(std::move(f));
}

}  // namespace

// Note [Fragmentation]: two shapes of it. (1) At the peak of reserved memory, reserved is at
// least twice the highest allocated value of the whole trace -- more than half of what the
// allocator held was never in use even at the program's busiest moment -- and the excess is
// more than one default large segment (kLargeBuffer, 20 MiB), so a small program's normal
// rounding (a 2 MiB segment for a 1 KiB tensor) is not reported. (2) At an out-of-memory
// error, the cached free memory (reserved - allocated at the oom event) would have held the
// failed request but no single cached block did. The bytes at stake are the excess, or the
// cached free memory at the OOM. The site is the allocation the peak's segment was reserved
// for (or the oom event's stack).
void detect_fragmentation(const Trace& trace, Diagnosis& out) {
  if (const std::string why = allocator_skip_reason(trace); !why.empty()) {
    out.skipped.push_back({"fragmentation", why});
    return;
  }
  const WindowPhases phases = window_phases(trace);
  for (const DeviceRef& dev : trace.devices()) {
    if (skip_device_without_blocks(trace, dev, "fragmentation", out)) continue;
    if (state_only(trace, dev.id)) {  // Note [State-only snapshots]
      out.skipped.push_back(
          {"fragmentation", dev.name + ": a snapshot of one moment (no allocation history), "
                                       "so no peak to compare reserved memory with"});
      continue;
    }
    std::optional<store::Peak> reserved = peak(trace, dev.id, store::Curve::reserved);
    std::optional<store::Peak> allocated = peak(trace, dev.id, store::Curve::allocated);
    if (!reserved || reserved->bytes <= 0 || !allocated) continue;
    const std::string settings = allocator_settings(trace);

    // (2) out-of-memory errors with enough cached memory in total.
    bool reported = false;
    for (const store::AllocatorEventRow& oom :
         store::allocator_events(trace.reader(), "oom", dev.id)) {
      if (reported) break;
      const auto requested = static_cast<int64_t>(oom.requested_size);
      const auto alloc = static_cast<int64_t>(oom.allocated);
      const auto res = static_cast<int64_t>(oom.reserved);
      const int64_t cached = res - alloc;
      if (requested <= 0 || cached < requested) continue;
      const SegmentsAt seg = segments_at(trace, dev.id, oom.ts);
      if (seg.largest_free >= requested) continue;
      Finding f;
      f.id = "fragmentation";
      f.device = dev.name;
      f.bytes = cached;
      f.title = "out of memory with " + format_bytes(cached) + " cached but free: no cached " +
                "block held the " + format_bytes(requested) + " request";
      set_site(trace, oom.stack_id, f);
      f.evidence = {{"failed request", bytes_text(requested)},
                    {"reserved at the OOM", bytes_text(res)},
                    {"allocated at the OOM", bytes_text(alloc)},
                    {"cached free at the OOM", bytes_text(cached)},
                    {"largest cached free block", bytes_text(seg.largest_free)},
                    {"segments", std::to_string(seg.count)},
                    {"allocator settings", settings.empty() ? "(defaults)" : settings}};
      f.fix = kFragmentationFix;
      out.findings.push_back(std::move(f));
      reported = true;
    }
    if (reported) continue;

    // (1) reserved far above allocated at the peak of reserved.
    const int64_t excess = reserved->bytes - allocated->bytes;
    if (reserved->bytes < 2 * allocated->bytes || excess <= kLargeBuffer) {
      // A window of an optimizer step alone (a ring buffer that kept only its last entries)
      // did not see the forward and backward whose peak the reserved memory served.
      if (!(phases.known && phases.optimizer && !phases.forward && !phases.backward))
        stranded_at_peak(trace, dev, *allocated, settings, out);
      continue;
    }
    const CurvesAt at = curves_at_seq(trace, dev.id, reserved->seq);
    const SegmentsAt seg = segments_at(trace, dev.id, reserved->ts_ns);
    Finding f;
    f.id = "fragmentation";
    f.device = dev.name;
    f.bytes = excess;
    f.title = "reserved memory peaks at " + format_bytes(reserved->bytes) + ", " +
              ratio_text(static_cast<double>(reserved->bytes) /
                         static_cast<double>(std::max<int64_t>(1, allocated->bytes))) +
              " the most ever allocated: cached blocks too small for the next requests";
    set_site(trace, next_alloc_stack(trace, dev.id, reserved->seq), f);
    f.evidence = {{"peak reserved", bytes_text(reserved->bytes)},
                  {"allocated at the peak of reserved", bytes_text(at.allocated)},
                  {"peak allocated (whole trace)", bytes_text(allocated->bytes)},
                  {"reserved but never needed", bytes_text(excess)},
                  {"segments at the peak", std::to_string(seg.count)},
                  {"largest cached free block at the peak", bytes_text(seg.largest_free)},
                  {"allocator settings", settings.empty() ? "(defaults)" : settings}};
    f.fix = kFragmentationFix;
    if (settings.find("expandable_segments:True") != std::string::npos)
      f.fix =
          "Expandable segments are already on: cap block splitting with max_split_size_mb:N "
          "(TL_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF), or pad inputs to a few fixed shapes.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
