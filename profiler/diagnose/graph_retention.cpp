// graph-retention (profiler/diagnose/diagnose.h): activations saved for backward that survive
// their step and grow across steps, a graph kept alive (an accumulated loss). Which blocks are
// activations: Note [Activations in the trace] in support.h. docs/diagnoses.md gives its
// evidence and thresholds.
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

void detect_graph_retention(const Trace& trace, Diagnosis& out) {
  if (std::string why = activations_missing(trace, false); !why.empty())
    return out.skipped.push_back({"graph-retention", why});
  if (load_steps(trace).empty()) return out.skipped.push_back({"graph-retention", kNoSteps});
  for (const DeviceRef& d : trace.devices()) {
    const std::vector<Step> steps = load_steps(trace, d.id);
    if (steps.size() < 2) continue;
    const std::vector<Block> acts = load_blocks(trace, d.id, true);
    const Growth g = activation_growth(acts, steps);
    if (!g.growing) continue;
    // What grew: activations live at the last boundary that were allocated after the first
    // fitted one (the warm-up boundary's parameters and state are not the retained graphs).
    const uint64_t from = steps[1].ts, last = steps.back().ts;
    std::vector<const Block*> retained;
    for (const Block& b : acts)
      if (b.alloc_ts >= from && b.alloc_ts < last && b.free_ts > last) retained.push_back(&b);
    const TopSite site = top_site(trace, retained);
    const int64_t first_bytes = g.boundaries[1].second, last_bytes = g.boundaries.back().second;
    const int64_t per_step = static_cast<int64_t>(g.slope_bytes_per_step);

    Finding f;
    f.id = "graph-retention";
    f.device = d.name;
    f.title = "activations saved for backward survive their step and grow by " +
              format_bytes(per_step) + " per step: a graph is kept alive (an accumulated loss?)";
    f.bytes = last_bytes - first_bytes;
    set_site(trace, site.stack, f);
    f.evidence = {
        {"growth per step", bytes_text(per_step)},
        {"steps fitted", std::to_string(g.boundaries.size() - 1) + " (r² " + fixed2(g.r2) + ")"},
        {"live activations at step " + std::to_string(g.boundaries[1].first),
         bytes_text(first_bytes)},
        {"live activations at step " + std::to_string(g.boundaries.back().first) + " (the last)",
         bytes_text(last_bytes)},
        {"retained from the top site",
         bytes_text(site.bytes) + " in " + std::to_string(site.count) + " allocations"},
    };
    note_inferred(trace, f);
    f.fix =
        "Keep no tensor that has a grad_fn across steps: accumulate `total += loss.detach()` "
        "(stays on the device) or `loss.item()`, and run loops that never call backward "
        "under tl::NoGradGuard (torch.no_grad()).";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
