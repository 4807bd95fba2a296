// kept-graph (profiler/diagnose/diagnose.h): a forward's graph kept alive, unused, under later
// steps -- a warm-up or evaluation pass run with grad mode on whose output is still referenced.
// docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// What makes it a finding: the kept graph's bytes at the peak are at least this share of it
// (a moderate finding's, Note [Severity]) and at least kMinKeptBytes.
constexpr double kMinKeptShare = kModerateMemoryShare;
constexpr int64_t kMinKeptBytes = 1 << 20;

}  // namespace

// Note [Kept graph]: a forward run with grad mode on saves tensors for a backward; when no
// backward comes and the program keeps the forward's output (`warm = model(x)` before the
// loop, a validation `logits` kept for logging), its graph keeps every one of them allocated
// for as long as the output lives, beneath every later step. Steps of a training loop free
// their own graphs in their backward; a graph that lives through a step whose backward ran,
// and that the backward did not free, is another forward's. The finding: the `activation`
// blocks live at the device's allocated peak that were made before the step holding it (in a
// snapshot, before its history began: the importer reads them from the sizes the window's own
// forward saves, Note [A graph from before the history] in profiler/importers/infer.cpp) and
// outlive that step; where they hold at least kMinKeptShare of the peak and kMinKeptBytes,
// they are the saving. A snapshot whose window runs no backward must show the training state
// (gradients, an optimizer's moments): without it, a forward with grad mode on is
// grad-in-eval's, which no_grad fixes together with the graph it keeps. The more specific
// findings keep theirs (Note [The more specific finding]): graphs that accumulate across steps
// are graph-retention's, a trace with backward(retain_graph) scopes is retained-graph's, and
// autocast's weight copies kept across steps are autocast-cache's.
// What it cannot see: which line keeps the output (a snapshot's blocks from before its history
// have no frames).
void detect_kept_graph(const Trace& trace, Diagnosis& out) {
  const WindowPhases phases = window_phases(trace);
  const bool imported = trace.imported_snapshot();
  if (!imported && !backward_scopes(trace, true).empty()) return;  // retained-graph's
  for (const DeviceRef& dev : trace.devices()) {
    if (state_only(trace, dev.id) || graph_retention_on(trace, dev.id)) continue;
    const std::optional<TimePoint> at = peak_point(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    // The step holding the peak: [from, to); in a snapshot of less than two steps, its window.
    uint64_t from = trace.origin_ns() + 1, to = ~uint64_t{0};
    const bool window = steps_of(trace, dev.id).size() < 2;
    if (!window) {
      const std::optional<StepSpan> holding = step_holding(trace, dev.id, pk->ts_ns);
      if (!holding || !holding->end_ts) continue;  // the last step: nothing is seen outliving it
      from = holding->ts, to = *holding->end_ts;
    } else if (!imported) {
      continue;
    }
    if (imported && !(phases.known && phases.backward) && !trains(trace, dev.id))
      continue;  // a forward with grad mode on and nothing that trains: grad-in-eval's
    std::vector<const store::AllocationRow*> kept;
    int64_t bytes = 0;
    const std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, *at);
    // Autocast's weight copies kept across steps are autocast-cache's (Note [A region around
    // the loop] in autocast_cache.cpp).
    const AutocastCopies copies = autocast_weight_copies(trace, live);
    for (const store::AllocationRow& r : live)
      if (r.category == events::Category::activation && r.alloc_ts < from &&
          !copies.seqs.count(r.seq) && (!r.free_requested_ts || *r.free_requested_ts >= to))
        kept.push_back(&r), bytes += static_cast<int64_t>(r.size);
    if (bytes < kMinKeptBytes ||
        static_cast<double>(bytes) < kMinKeptShare * static_cast<double>(pk->bytes))
      continue;
    const auto largest = std::max_element(kept.begin(), kept.end(),
                                          [](auto* a, auto* b) { return a->size < b->size; });
    Finding f;
    f.id = "kept-graph";
    f.device = dev.name;
    f.bytes = bytes;
    f.title = "a forward's graph (" + format_bytes(bytes) +
              " of saved activations) is kept alive under later steps, which never use it: a "
              "warm-up or evaluation output still referenced?";
    set_site(trace, (*largest)->stack_id, f);
    f.evidence = {{"peak allocated", bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
                  {window ? "saved by a forward before the snapshot's history, live at the peak"
                          : "saved by a forward before the peak's step, live through it",
                   bytes_text(bytes) + " in " + std::to_string(kept.size()) + " allocations"},
                  {"peak without them", bytes_text(pk->bytes - bytes)}};
    if (window)
      f.evidence.emplace_back("matched",
                              "size for size against what the window's own forward "
                              "saves (the same model on the same shapes)");
    if (const std::string phase = phase_label(phases); !phase.empty())
      f.evidence.insert(f.evidence.begin(), {"phase", phase});
    note_inferred(trace, f);
    f.fix =
        "Run the warm-up (or evaluation) forward under torch.no_grad() (tl::NoGradGuard), or drop "
        "its output (del out) before training: the tensors its graph saved live as long as the "
        "output does, and nothing calls backward on it.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
