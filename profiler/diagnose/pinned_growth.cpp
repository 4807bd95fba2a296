// pinned-growth (profiler/diagnose/diagnose.h): pinned host memory or prefetched input growing
// with DataLoader workers. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

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

}  // namespace tidemark::diagnose::detail
