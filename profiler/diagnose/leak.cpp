// leak (profiler/diagnose/diagnose.h): memory live at the end, or growing linearly across
// steps. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// Thresholds (docs/diagnoses.md says why).
constexpr int64_t kMinLeakedAtEnd = 1 << 20;  // still allocated at the end

}  // namespace

void detect_leak(const Trace& trace, Diagnosis& out) {
  const std::vector<Step> steps = load_steps(trace);
  // An imported snapshot ends while the program runs: what is live then is not leaked, so
  // only growth across steps counts, and its steps are those inferred from its annotations
  // (the importer's Note [Inferred steps]).
  const bool snapshot = trace.imported_snapshot();
  if (snapshot && steps.empty())
    return out.skipped.push_back(
        {"leak",
         "the trace is an imported PyTorch snapshot: it ends at the moment the snapshot "
         "was taken, so what is live then is not leaked, and it has no steps to fit "
         "growth over (no ProfilerStep, Optimizer.zero_grad or Optimizer.step annotation "
         "to infer them from)"});
  for (const DeviceRef& d : trace.devices()) {
    // Note [The more specific finding]: with graph-retention on this device, activations are
    // its finding; leak looks at the rest.
    const bool skip_activations = graph_retained(trace, d.id, steps);
    std::vector<Block> blocks = load_blocks(trace, d.id, false);
    if (skip_activations)
      blocks.erase(
          std::remove_if(blocks.begin(), blocks.end(), [](const Block& b) { return b.activation; }),
          blocks.end());

    // Growth across steps (Note [Growth]).
    Growth g;
    if (!steps.empty()) {
      std::vector<uint64_t> times;
      for (const Step& s : steps) times.push_back(s.ts);
      std::vector<int64_t> live = live_bytes_at(blocks, times);
      std::vector<std::pair<int64_t, int64_t>> b;
      for (size_t i = 0; i < steps.size(); ++i) b.emplace_back(steps[i].number, live[i]);
      g = fit_growth(std::move(b));
    }
    // Still allocated at the end: from the loop on when there are steps (what was set up
    // before the first step -- model, data, optimizer -- may live to the end by design).
    const uint64_t loop_start = steps.empty() ? 0 : steps.front().ts;
    std::vector<const Block*> at_end;
    int64_t end_bytes = 0;
    for (const Block& b : blocks)
      if (b.free_ts == kOpen && b.alloc_ts >= loop_start) {
        at_end.push_back(&b);
        end_bytes += b.bytes;
      }
    const bool end_leak = !snapshot && end_bytes >= kMinLeakedAtEnd;
    if (!g.growing && !end_leak) continue;

    Finding f;
    f.id = "leak";
    f.device = d.name;
    if (g.growing) {
      const uint64_t from = steps[1].ts, last = steps.back().ts;
      std::vector<const Block*> grown;
      for (const Block& b : blocks)
        if (b.alloc_ts >= from && b.alloc_ts < last && b.free_ts > last) grown.push_back(&b);
      const TopSite site = top_site(trace, grown);
      const int64_t per_step = static_cast<int64_t>(g.slope_bytes_per_step);
      f.title = "live memory grows by " + format_bytes(per_step) + " per step" +
                (skip_activations ? " (besides the retained activations)" : "");
      f.bytes = g.boundaries.back().second - g.boundaries[1].second;
      set_site(trace, site.stack, f);
      f.evidence = {
          {"growth per step", bytes_text(per_step)},
          {"steps fitted", std::to_string(g.boundaries.size() - 1) + " (r² " + fixed2(g.r2) + ")"},
          {"live at step " + std::to_string(g.boundaries[1].first),
           bytes_text(g.boundaries[1].second)},
          {"live at step " + std::to_string(g.boundaries.back().first) + " (the last)",
           bytes_text(g.boundaries.back().second)},
          {"grown at the top site",
           bytes_text(site.bytes) + " in " + std::to_string(site.count) + " allocations"},
      };
      if (end_leak) f.evidence.emplace_back("still allocated at the end", bytes_text(end_bytes));
      f.bytes = std::max(f.bytes, end_bytes);
    } else {
      const TopSite site = top_site(trace, at_end);
      f.title = format_bytes(end_bytes) + " allocated " +
                (steps.empty() ? "" : "during the loop ") + "is never freed";
      f.bytes = end_bytes;
      set_site(trace, site.stack, f);
      f.evidence = {
          {"still allocated at the end",
           bytes_text(end_bytes) + " in " + std::to_string(at_end.size()) + " allocations"},
          {"from the top site",
           bytes_text(site.bytes) + " in " + std::to_string(site.count) + " allocations"},
      };
    }
    f.fix =
        "Find what keeps the site's tensors referenced (a list, a cache or a history "
        "appended every step) and drop or bound it; store values with .item() or "
        ".detach().cpu() when only the numbers are needed.";
    note_inferred(trace, f);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
