// retained-graph (profiler/diagnose/diagnose.h): backward(retain_graph=true) keeping a step's
// saved activations alive into the next step. docs/diagnoses.md gives its evidence and
// thresholds.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// Thresholds (docs/diagnoses.md says why).
constexpr int64_t kMinRetainedBytes = 64 << 10;  // stale activations
constexpr double kMinRetainedShare = 0.01;       // ... of the step's peak

}  // namespace

void detect_retained_graph(const Trace& trace, Diagnosis& out) {
  if (std::string why = activations_missing(trace, true); !why.empty())
    return out.skipped.push_back({"retained-graph", why});
  const std::vector<Step> steps = load_steps(trace);
  if (steps.empty()) return out.skipped.push_back({"retained-graph", kNoSteps});
  const auto retains = backward_scopes(trace, true);
  if (retains.empty()) return;  // no backward(retain_graph): nothing to retain
  // A backward(retain_graph) began between t0 and t1 (exclusive).
  auto retained_between = [&](uint64_t t0, uint64_t t1) {
    auto it = std::upper_bound(retains.begin(), retains.end(), std::make_pair(t0, kOpen));
    return it != retains.end() && it->first < t1;
  };
  for (const DeviceRef& d : trace.devices()) {
    // Candidates: activations that outlived their step with a retained backward after them.
    std::vector<Block> acts;
    for (Block& b : load_blocks(trace, d.id, true)) {
      auto next = std::upper_bound(steps.begin(), steps.end(), b.alloc_ts,
                                   [](uint64_t ts, const Step& s) { return ts < s.ts; });
      if (next != steps.end() && b.free_ts > next->ts && retained_between(b.alloc_ts, next->ts))
        acts.push_back(b);
    }
    if (acts.empty()) continue;
    // The step whose peak holds the most activations of earlier steps kept by a retained graph.
    struct Worst {
      int64_t step = 0, stale = 0, peak = 0;
      std::vector<const Block*> blocks;
    } worst;
    for (size_t i = 1; i < steps.size(); ++i) {
      // The step's allocated peak: the highest value, first reached (by time, then seq).
      const uint64_t end = steps[i].end_ts == kOpen ? trace.end_ns() + 1 : steps[i].end_ts;
      std::optional<store::LodRow> high;
      if (end > steps[i].ts)
        trace.reader().for_each_lod(d.id, 0, steps[i].ts, end - 1, [&](const store::LodRow& r) {
          if (!high || r.allocated > high->allocated ||
              (r.allocated == high->allocated &&
               (r.t < high->t || (r.t == high->t && *r.seq < *high->seq))))
            high = r;
          return true;
        });
      if (!high) continue;
      const uint64_t at = high->t;
      const int64_t peak = high->allocated;
      std::vector<const Block*> stale;
      int64_t bytes = 0;
      for (const Block& b : acts)
        if (b.alloc_ts < steps[i].ts && b.free_ts > at &&
            retained_between(b.alloc_ts, steps[i].ts)) {
          stale.push_back(&b);
          bytes += b.bytes;
        }
      if (bytes > worst.stale) worst = {steps[i].number, bytes, peak, std::move(stale)};
    }
    if (worst.stale < kMinRetainedBytes ||
        static_cast<double>(worst.stale) < kMinRetainedShare * static_cast<double>(worst.peak))
      continue;
    const TopSite site = top_site(trace, worst.blocks);
    Finding f;
    f.id = "retained-graph";
    f.device = d.name;
    f.title =
        "backward(retain_graph=true) keeps a step's saved activations alive into the next "
        "step, raising its peak by up to " +
        format_bytes(worst.stale);
    f.bytes = worst.stale;
    set_site(trace, site.stack, f);
    f.evidence = {
        {"earlier steps' activations live at the peak of step " + std::to_string(worst.step),
         bytes_text(worst.stale) + " in " + std::to_string(worst.blocks.size()) + " allocations"},
        {"peak allocated in step " + std::to_string(worst.step), bytes_text(worst.peak)},
        {"that peak without them (at most)", bytes_text(worst.peak - worst.stale)},
        {"backward(retain_graph) calls", std::to_string(retains.size())},
    };
    f.fix =
        "Call a plain backward() unless a second backward through the same graph follows in "
        "the same step; otherwise drop the last reference to the graph (the loss) before "
        "the next forward.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
