// oom (profiler/diagnose/diagnose.h): an out-of-memory error explained -- shortage or
// fragmentation, and what was live. docs/diagnoses.md gives its evidence.
#include <algorithm>
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

// Note [OOM post-mortem]: every out-of-memory error (an `oom` allocator event: tensorlib's, or
// an imported PyTorch snapshot's) gets a finding that says what a reader of PyTorch's message
// would have to work out: the request, the device's free and total memory where known,
// allocated against reserved at that instant, the largest cached free block against the
// request, and what was live then by category (when the trace has categories, recorded or
// inferred) and by the user's site. A request is served from its pool's
// segments (up to 1 MiB: the small pool), so the largest free block counted is its pool's.
// The verdict:
//  * fragmentation, when the cached free memory alone would have held the request but no
//    single cached block of its pool did (the fragmentation detector names the pitfall too);
//  * a shortage otherwise: the request was `short` more than the device's free memory and the
//    cache together; the fix is to hold less at that moment, and the sites say what.
// Bytes at stake: the request. Site: the failed allocation's.
void detect_oom(const Trace& trace, Diagnosis& out) {
  const std::string settings = allocator_settings(trace);
  for (const store::AllocatorEventRow& oom : store::allocator_events(trace.reader(), "oom")) {
    const int64_t device = oom.device;
    const uint64_t ts = oom.ts;
    const auto requested = static_cast<int64_t>(oom.requested_size);
    const auto device_free = static_cast<int64_t>(oom.device_free);
    const auto device_total = static_cast<int64_t>(oom.device_total);
    const auto allocated = static_cast<int64_t>(oom.allocated);
    const auto reserved = static_cast<int64_t>(oom.reserved);
    const int64_t cached = std::max<int64_t>(0, reserved - allocated);
    const events::Pool pool = requested <= kSmallSize ? events::Pool::small : events::Pool::large;
    const SegmentsAt seg = segments_at(trace, device, ts, pool);
    const bool fragmented = cached >= requested && seg.largest_free < requested;
    const int64_t short_by = requested - device_free - cached;
    Finding f;
    f.id = "oom";
    f.device = device_label(trace, device);
    f.bytes = requested;
    f.severity = Severity::major;  // the run failed here, whatever the request (Note [Severity])
    f.title =
        "out of memory at " + trace.time_text(ts) + ": a " + format_bytes(requested) +
        " request failed; " +
        (fragmented ? format_bytes(cached) + " was cached but no free block held it (fragmentation)"
                    : "the device was " + format_bytes(std::max<int64_t>(short_by, 0)) +
                          " short, with " + format_bytes(allocated) + " allocated");
    set_site(trace, oom.stack_id, f);
    f.evidence.push_back({"failed request", bytes_text(requested)});
    if (device_total > 0) f.evidence.push_back({"device total", bytes_text(device_total)});
    f.evidence.push_back({"device free (outside the cache)", bytes_text(device_free)});
    f.evidence.push_back({"allocated at the OOM", bytes_text(allocated)});
    f.evidence.push_back({"reserved at the OOM", bytes_text(reserved)});
    f.evidence.push_back({"cached free at the OOM", bytes_text(cached)});
    f.evidence.push_back(
        {std::string("largest cached free block of the ") + store::pool_name(pool) + " pool",
         bytes_text(seg.largest_free)});
    if (!fragmented) f.evidence.push_back({"short by", bytes_text(std::max<int64_t>(short_by, 0))});
    if (device_total > 0 && device_total - reserved - device_free > kLargeBuffer)
      f.evidence.push_back({"held outside this allocator (other processes, CUDA context)",
                            bytes_text(device_total - reserved - device_free)});
    const TimePoint at{ts, oom.seq};
    // What was live by category: recorded (tensorlib) or inferred (an imported snapshot, Note
    // [Inferred categories] in profiler/importers/infer.cpp), said in each line's name.
    const LiveBreakdown cats = live_at(trace, device, at, GroupBy::category, 0);
    const bool categorised = std::any_of(cats.groups.begin(), cats.groups.end(),
                                         [](const Group& g) { return g.key != "unknown"; });
    const std::string how = trace.categories_inferred().empty() ? "" : " (inferred)";
    for (const Group& g : categorised ? cats.groups : std::vector<Group>{})
      f.evidence.push_back(
          {"live at the OOM by category" + how + ": " + g.label,
           bytes_text(g.bytes) + " in " + std::to_string(g.count) + " allocations"});
    const LiveBreakdown live = live_at(trace, device, at, GroupBy::site, 3);
    for (const Group& g : live.groups)
      f.evidence.push_back({"live at the OOM: " + g.label, bytes_text(g.bytes)});
    f.evidence.push_back({"allocator settings", settings.empty() ? "(defaults)" : settings});
    // The words that fit: activations most of what was live call for checkpointing first.
    const bool activations_most = categorised && cats.groups.front().key == "activation" &&
                                  2 * cats.groups.front().bytes >= cats.bytes;
    f.fix =
        fragmented ? kFragmentationFix
        : activations_most
            ? "Hold fewer activations at that moment: they are most of what was live (see "
              "activation-peak). Recompute them in backward (activation checkpointing) for the "
              "layers that hold them, use a smaller batch or sequence length, or run on a device "
              "with more memory."
            : "Hold less at that moment: the sites live at the OOM above hold the most. Use a "
              "smaller "
              "batch or sequence length, recompute activations in backward (activation "
              "checkpointing) for the layers that hold them, release tensors kept across steps, "
              "or run on a device with more memory.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
