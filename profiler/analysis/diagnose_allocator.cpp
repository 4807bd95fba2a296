// Detectors of the caching allocator (profiler/analysis/diagnose.h): fragmentation,
// cache-held and pinned-growth. They read the segments, allocations, allocator_events and
// memory_lod tables (docs/trace-format.md); view-retention and copy-instead-of-view are in
// diagnose_views.cpp.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profiler/analysis/diagnose_allocator_support.h"
#include "profiler/analysis/memory.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::analysis::detail {

namespace {

bool has_segments(const Trace& trace) {
  return store::any_segment(trace.reader());
}

// Whether `device` has allocated blocks (all devices: -1). A CUDA-injected trace of a program
// with its own caching allocator (PyTorch) has its segments only: allocated reads 0 there, so
// reserved against allocated says nothing about fragmentation or caching.
bool has_blocks(const Trace& trace, int64_t device = -1) {
  store::AllocationFilter f;
  if (device >= 0) f.device = device;
  return store::any_allocation(trace.reader(), f);
}

// A device with reserved memory but no blocks, in a trace where other devices have blocks:
// skipped with a note naming it (true), or a device to examine (false).
bool skip_device_without_blocks(const Trace& trace, const DeviceRef& dev, const char* id,
                                Diagnosis& out) {
  if (has_blocks(trace, dev.id)) return false;
  if (store::any_segment(trace.reader(), {.device = dev.id}))
    out.skipped.push_back({id, dev.name + ": reserved memory but no allocated blocks (a "
                                          "CUDA-injected device: its program's own allocator)"});
  return true;
}

// Why the allocator detectors skip a trace, or "" when they can run.
std::string allocator_skip_reason(const Trace& trace) {
  if (!has_segments(trace)) return "the trace has no segment (reserved memory) events";
  if (!has_blocks(trace))
    return "the trace has reserved memory but no allocated blocks (a CUDA-injected trace sees "
           "the segments the program's own allocator reserves, not its blocks; `tidemark "
           "import SNAPSHOT --onto` adds PyTorch's)";
  return "";
}

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

// Reserved memory at `ts`: how many segments (or mapped ranges), and the largest cached free
// block -- the largest gap between the blocks still active (not free_completed) inside one.
// With `pool`, only that pool's segments: a request is served from its
// own pool (a request up to 1 MiB from small segments), so a free block of the other cannot
// hold it.
struct SegmentsAt {
  int64_t count = 0;
  int64_t largest_free = 0;
};
SegmentsAt segments_at(const Trace& trace, int64_t device, uint64_t ts,
                       std::optional<events::Pool> pool = std::nullopt) {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [addr, end)
  for (const store::SegmentRow& r : store::segments_at(trace.reader(), device, ts, pool))
    ranges.push_back({static_cast<int64_t>(r.addr), static_cast<int64_t>(r.addr + r.size)});
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (const store::AllocationRow& a : store::blocks_active_at(trace.reader(), device, ts))
    blocks.push_back({static_cast<int64_t>(a.addr), static_cast<int64_t>(a.addr + a.size)});
  SegmentsAt out;
  out.count = static_cast<int64_t>(ranges.size());
  size_t b = 0;
  for (auto [lo, hi] : ranges) {
    while (b < blocks.size() && blocks[b].second <= lo) ++b;
    int64_t cursor = lo;
    for (size_t k = b; k < blocks.size() && blocks[k].first < hi; ++k) {
      out.largest_free = std::max(out.largest_free, blocks[k].first - cursor);
      cursor = std::max(cursor, blocks[k].second);
    }
    out.largest_free = std::max(out.largest_free, hi - cursor);
  }
  return out;
}

std::string allocator_settings(const Trace& trace) {
  return trace.meta_text(store::meta_keys::kAllocatorSettings);
}

// The stack of the first allocation on the device after event `seq` (the one a new segment
// was reserved for), 0 when none.
uint64_t next_alloc_stack(const Trace& trace, int64_t device, uint64_t seq) {
  const std::optional<store::AllocationSpan> next = store::first_allocation(
      trace.reader(), {.device = device, .after_seq = seq}, store::AllocationOrder::seq);
  return next ? next->stack_id : 0;
}

const char* kFragmentationFix =
    "Let segments grow in place: TL_ALLOC_CONF=expandable_segments:True (PyTorch: "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); or stop the cache from splitting large "
    "blocks that other sizes cannot reuse with max_split_size_mb:N; or pad inputs to a few "
    "fixed shapes (bucketing) so freed blocks fit the next request.";

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

// Note [Cache held]: reserved memory is either cached (free blocks the allocator keeps for
// reuse, which empty_cache() can return) or allocated (blocks tensors still use, which it
// cannot). Two findings:
// (1) empty_cache() that could not help: at the call, allocated memory was at least half of
//     reserved and more than kLargeBuffer -- what the caller hoped to return is still
//     referenced. Bytes at stake: the allocated bytes; site: the largest live allocation site
//     at the call (what must be released); the call's own site is in the evidence.
// (2) Cached memory held long after allocations fell: after the last moment allocated memory
//     stood at half its peak or more, reserved - allocated never went below C until the end of
//     the trace, with C above kLargeBuffer (less is the allocator's normal rounding) and that
//     tail lasting at least 10% of the trace. empty_cache() there would return C. Site: the
//     largest allocation site at the allocated peak (the phase that built the cache).
void detect_cache_held(const Trace& trace, Diagnosis& out) {
  if (const std::string why = allocator_skip_reason(trace); !why.empty()) {
    out.skipped.push_back({"cache-held", why});
    return;
  }
  for (const DeviceRef& dev : trace.devices()) {
    if (skip_device_without_blocks(trace, dev, "cache-held", out)) continue;
    // (1)
    bool reported = false;
    for (const store::AllocatorEventRow& ec :
         store::allocator_events(trace.reader(), "empty_cache", dev.id)) {
      if (reported) break;
      const uint64_t ts = ec.ts;
      const auto alloc = static_cast<int64_t>(ec.allocated);
      const auto res = static_cast<int64_t>(ec.reserved);
      const auto released = static_cast<int64_t>(ec.released);
      // The event is emitted after the release: `reserved` is what stayed.
      const int64_t before = res + released;
      if (alloc <= kLargeBuffer || 2 * alloc < before) continue;
      Finding f;
      f.id = "cache-held";
      f.device = dev.name;
      f.bytes = alloc;
      f.title = "empty_cache() released " + format_bytes(released) + " of " + format_bytes(before) +
                " reserved: " + format_bytes(alloc) +
                " is still allocated by live tensors, not cached";
      std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, {ts, {}});
      std::vector<Group> holders = group_allocations(trace, live, GroupBy::site, 1);
      uint64_t holder_stack = 0;
      for (const store::AllocationRow& r : live)
        if (!holders.empty() && trace.site(r.stack_id).key == holders[0].key) {
          holder_stack = r.stack_id;
          break;
        }
      set_site(trace, holder_stack ? holder_stack : ec.stack_id, f);
      f.evidence = {
          {"reserved before", bytes_text(before)},
          {"released", bytes_text(released)},
          {"still allocated (referenced)", bytes_text(alloc)},
          {"cached but free after", bytes_text(std::max<int64_t>(0, before - released - alloc))}};
      if (ec.stack_id) f.evidence.push_back({"empty_cache() at", trace.site(ec.stack_id).label});
      if (!holders.empty())
        f.evidence.push_back({"held mostly by", holders[0].label + ": " +
                                                    bytes_text(holders[0].bytes) + " in " +
                                                    std::to_string(holders[0].count) + " blocks"});
      f.fix =
          "empty_cache() only returns cached blocks no tensor uses. Drop the references first "
          "(clear the list or dict holding the tensors, `del` them), then call it -- or do not "
          "call it: the allocator reuses its cache anyway.";
      out.findings.push_back(std::move(f));
      reported = true;
    }
    if (reported) continue;

    // (2) Not on an imported snapshot: it ends when it was taken, not when the program let go
    // of the device (a one-shot benchmark dumps right after its work, then exits or empties
    // the cache), and a snapshot without times has no durations to measure the hold by.
    if (trace.imported_snapshot()) {
      out.skipped.push_back(
          {"cache-held", dev.name + ": a snapshot ends when it was taken, so memory cached "
                                    "at its end says nothing of how long the program held it"});
      continue;
    }
    std::optional<store::Peak> allocated = peak(trace, dev.id, store::Curve::allocated);
    if (!allocated || allocated->bytes <= 0) continue;
    struct Row {
      uint64_t t;
      int64_t allocated, reserved;
    };
    std::vector<Row> rows;
    trace.reader().for_each_lod(dev.id, 0, 0, std::numeric_limits<int64_t>::max(),
                                [&](const store::LodRow& r) {
                                  rows.push_back({r.t, r.allocated, r.reserved});
                                  return true;
                                });
    size_t last_high = rows.size();
    for (size_t i = rows.size(); i-- > 0;)
      if (2 * rows[i].allocated >= allocated->bytes) {
        last_high = i;
        break;
      }
    if (last_high + 1 >= rows.size()) continue;
    const uint64_t fall_ts = rows[last_high + 1].t;
    int64_t held = std::numeric_limits<int64_t>::max();
    for (size_t i = last_high + 1; i < rows.size(); ++i)
      held = std::min(held, rows[i].reserved - rows[i].allocated);
    const uint64_t tail = trace.end_ns() > fall_ts ? trace.end_ns() - fall_ts : 0;
    if (held <= kLargeBuffer || tail * 10 < trace.duration_ns()) continue;
    Finding f;
    f.id = "cache-held";
    f.device = dev.name;
    f.bytes = held;
    f.title = format_bytes(held) + " of reserved memory stays cached but free for " +
              format_duration(tail) + " after allocations fell";
    std::optional<TimePoint> pp = peak_point(trace, dev.id);
    if (pp) {
      std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, *pp);
      std::sort(live.begin(), live.end(),
                [](const auto& a, const auto& b) { return a.size > b.size; });
      if (!live.empty()) set_site(trace, live.front().stack_id, f);
    }
    f.evidence = {{"peak allocated", bytes_text(allocated->bytes)},
                  {"allocated at the end", bytes_text(rows.back().allocated)},
                  {"reserved at the end", bytes_text(rows.back().reserved)},
                  {"cached but free, at least", bytes_text(held)},
                  {"held for", format_duration(tail)}};
    f.fix =
        "This memory is cached, not allocated: empty_cache() after the phase that needed it "
        "(tl::empty_cache; torch.cuda.empty_cache()) returns it to the device for other "
        "processes. It does not lower this process's own peak; skip it if nothing else needs "
        "the memory.";
    out.findings.push_back(std::move(f));
  }
}

// Note [Pinned growth]: DataLoader batches are allocations of category `input` (tensorlib
// announces each batch; with pin_memory on a CUDA build they are page-locked host memory, on
// a CPU build pinning has no effect and they are ordinary host blocks). A size of input block
// allocated at least once every two steps is a per-batch buffer (a dataset loaded once is
// not); the largest such size marks the batches. At each step start the live blocks of that
// size are the batch in use plus the batches built ahead; the median over the steps is the
// loader's steady depth (steps after the last batch was built, when the queue drains at the
// end of an epoch, are left out). It is a finding when more than 8 batches wait ahead -- PyTorch's
// default prefetch_factor of 2 for 4 workers; a loop that keeps pace needs one or two -- and
// the batches beyond the next one are worth 1% of the device's allocated peak. The bytes at
// stake are those batches beyond the next.
void detect_pinned_growth(const Trace& trace, Diagnosis& out) {
  if (!store::any_allocation(trace.reader(), {.categorized = true})) {
    out.skipped.push_back({"pinned-growth",
                           "the trace has no allocation categories (an imported allocator "
                           "snapshot), so input batches cannot be told apart"});
    return;
  }
  const std::vector<uint64_t> steps = step_times(trace);
  if (steps.empty()) {
    out.skipped.push_back({"pinned-growth",
                           "the trace has no steps (tl::profiler::step()), needed to tell the "
                           "batch in use from the batches built ahead"});
    return;
  }
  constexpr int64_t kMaxAhead = 8;  // batches
  int64_t pinned_copies = 0;
  store::for_each_memcpy(trace.reader(), [&](const store::MemcpyRow& m) {
    if (m.pinned && m.direction == "host_to_device") ++pinned_copies;
  });
  for (const DeviceRef& dev : trace.devices()) {
    std::vector<store::AllocationSpan> inputs;
    store::for_each_allocation(
        trace.reader(), {.device = dev.id, .category = events::Category::input},
        store::AllocationOrder::none, [&](const store::AllocationSpan& r) { inputs.push_back(r); });
    std::map<uint64_t, int64_t> per_size;  // size -> count
    for (const auto& r : inputs) per_size[r.size] += 1;
    const int64_t min_count = std::max<int64_t>(2, static_cast<int64_t>(steps.size()) / 2);
    uint64_t batch_size = 0;
    int64_t per_batch_total = 0;
    for (const auto& [size, count] : per_size) {
      if (count < min_count) continue;
      batch_size = std::max(batch_size, size);
      per_batch_total += static_cast<int64_t>(size) * count;
    }
    if (batch_size == 0) continue;
    const int64_t batches = per_size[batch_size];
    const int64_t batch_bytes = per_batch_total / batches;
    // The steady state: steps while the loader was still building batches (at the end of an
    // epoch the queue drains and says nothing about the prefetch depth).
    uint64_t last_build = 0;
    for (const auto& r : inputs)
      if (r.size == batch_size) last_build = std::max(last_build, r.alloc_ts);
    std::vector<uint64_t> steady;
    for (uint64_t s : steps)
      if (s <= last_build) steady.push_back(s);
    if (steady.empty()) steady = steps;
    std::vector<int64_t> depth;
    for (uint64_t s : steady) {
      int64_t n = 0;
      for (const auto& r : inputs)
        if (r.size == batch_size && r.alloc_ts <= s &&
            (!r.free_requested_ts || *r.free_requested_ts > s))
          ++n;
      depth.push_back(n);
    }
    std::vector<int64_t> sorted = depth;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const int64_t median = sorted[sorted.size() / 2];
    const int64_t ahead = median - 1;  // the batch in use is not ahead
    const int64_t at_stake = (median - 2) * batch_bytes;
    std::optional<store::Peak> p = peak(trace, dev.id, store::Curve::allocated);
    if (ahead <= kMaxAhead || at_stake < (p ? p->bytes / 100 : 0)) continue;
    // Input batch bytes live at their highest.
    std::vector<std::pair<uint64_t, int64_t>> changes;
    for (const auto& r : inputs) {
      if (per_size[r.size] < min_count) continue;
      changes.push_back({r.alloc_ts, static_cast<int64_t>(r.size)});
      if (r.free_requested_ts)
        changes.push_back({*r.free_requested_ts, -static_cast<int64_t>(r.size)});
    }
    std::sort(changes.begin(), changes.end());
    int64_t live = 0, live_peak = 0;
    for (auto [t, d] : changes) live_peak = std::max(live_peak, live += d);
    // Batches are built on the loader's worker threads (or the loop's own, without workers).
    uint64_t stack = 0;
    std::set<uint64_t> threads;
    for (const auto& r : inputs) {
      if (r.size != batch_size) continue;
      threads.insert(r.thread);
      if (!stack) stack = r.stack_id;
    }
    Finding f;
    f.id = "pinned-growth";
    f.device = dev.name;
    f.bytes = at_stake;
    f.title = std::to_string(ahead) + " input batches (" + format_bytes(ahead * batch_bytes) +
              ") wait ahead of the training loop at every step" +
              (pinned_copies ? " in pinned host memory" : "");
    set_site(trace, stack, f);
    f.evidence = {
        {"one batch", bytes_text(batch_bytes)},
        {"batches ahead at a step start (median)", std::to_string(ahead)},
        {"most batches ahead", std::to_string(*std::max_element(depth.begin(), depth.end()) - 1)},
        {"input batch bytes live at their peak", bytes_text(live_peak)},
        {"threads building batches", std::to_string(threads.size())},
        {"steps", std::to_string(steps.size())},
        {"pinned host-to-device copies", std::to_string(pinned_copies)}};
    f.fix =
        "Use fewer DataLoader workers and a smaller prefetch_factor (PyTorch: num_workers, "
        "prefetch_factor): workers x prefetch batches are built ahead, and with pin_memory each "
        "one is page-locked host memory. Two or three ahead keep a device-bound loop fed.";
    note_inferred(trace, f);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::analysis::detail
