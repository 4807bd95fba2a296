// cache-held (profiler/diagnose/diagnose.h): reserved memory held long after allocations fell,
// or an empty_cache() that could not help. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

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

}  // namespace tidemark::diagnose::detail
