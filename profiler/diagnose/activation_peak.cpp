// The activation-peak detector (profiler/diagnose/diagnose.h): a peak made mostly of
// activations saved for backward, the layers holding them, and what activation checkpointing
// would save. Which blocks are activations: Note [Activations in the trace] in
// support.h. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// Thresholds (docs/diagnoses.md says why).
constexpr double kMinActivationShare = 0.5;       // activations are "most of" the peak
constexpr int64_t kMinActivationBytes = 1 << 20;  // smaller is noise on any accelerator
constexpr double kMinSavedShare = 0.1;            // the estimated saving, of the peak
constexpr size_t kMinLayers = 4;                  // two segments of two layers at least

// Note [Repeated blocks]: a snapshot has no module scopes, and a model whose code is all a
// library's (a Hugging Face model called from a notebook cell) gives every activation one
// site, so runs of one site make one "layer". Its blocks still show in the order of what they
// save: a transformer's decoder layers are called from one line in a loop, so each saves the
// same tensors from the same call paths, and the call path of a block's first saved tensor
// recurs at a fixed distance, once per block. The call path that recurs most regularly (at
// least kMinLayers times, every gap the same, covering at least half of the activations; the
// earliest on a tie: a block's first) cuts them into blocks: what comes before its first
// occurrence is one layer (the embedding), each period one, what follows the last one (the
// head). On imported snapshots these blocks are the layers whenever they are found; runs of
// one site otherwise.
std::vector<size_t> repeated_block_starts(const std::vector<uint64_t>& stacks) {
  std::unordered_map<uint64_t, std::vector<size_t>> seen;
  for (size_t i = 0; i < stacks.size(); ++i)
    if (stacks[i]) seen[stacks[i]].push_back(i);
  const std::vector<size_t>* best = nullptr;
  size_t best_g = 0;
  for (const auto& [stack, at] : seen) {
    if (at.size() < kMinLayers) continue;
    const size_t g = at[1] - at[0];
    bool regular = g > 0;
    for (size_t j = 2; j < at.size() && regular; ++j) regular = at[j] - at[j - 1] == g;
    if (!regular) continue;
    const size_t cover = at.size() * g;
    if (!best || cover > best->size() * best_g ||
        (cover == best->size() * best_g && at[0] < best->front()))
      best = &at, best_g = g;
  }
  if (!best || 2 * best->size() * best_g < stacks.size()) return {};
  std::vector<size_t> starts;
  if (best->front() > 0) starts.push_back(0);
  for (size_t i : *best) starts.push_back(i);
  if (best->back() + best_g < stacks.size()) starts.push_back(best->back() + best_g);
  return starts;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * share);
  return buf;
}

// What a layer is: the innermost scope path open at the allocation (a tensorlib module's
// forward runs in a scope named by its path), else the allocation's site (Note [Allocation
// site]): an imported snapshot has no scopes.
std::string layer_key(const Trace& trace, const store::AllocationRow& r) {
  return r.scope.empty() ? "site:" + trace.site(r.stack_id).key : "scope:" + r.scope;
}
std::string layer_label(const Trace& trace, const store::AllocationRow& r) {
  if (r.scope.empty()) return trace.site(r.stack_id).label;
  // A module's path already names its parents ("model/model.0/model.0.3" -> "model.0.3").
  const size_t slash = r.scope.rfind('/');
  return slash == std::string::npos ? r.scope : r.scope.substr(slash + 1);
}

}  // namespace

// Note [Checkpointing estimate]
// Activation checkpointing (torch.utils.checkpoint, tl::checkpoint) runs a segment of layers
// without saving what is inside it, keeps the tensor it hands to the next segment, and
// recomputes the segment's insides during backward, one segment at a time. The estimate reads
// the activations live at the allocated peak in the order they were allocated (forward order)
// and cuts them into layers: maximal runs of blocks of the same scope (or site, without
// scopes), so a loop over identical blocks whose lines repeat is still one layer per block.
// Checkpointing every k-th layer makes segments of k consecutive layers; at the peak it keeps
//   * for every segment, its output: the largest block of its last layer (an over-estimate
//     when that layer saved several tensors, which keeps the saving on the safe side), and
//   * one segment's activations in full: the largest segment, recomputed in backward,
// so activations at the peak become  sum(outputs) + max(segment)  instead of their total.
// The saving is the difference; the k reported is the one saving most (k = 2 .. n/2, ties to
// the smaller k), which is near sqrt(n) for n layers of equal size (Chen et al., 2016). It is
// an estimate: parameters, gradients and the allocator's rounding stay as they were, and the
// peak may move to another moment (the start of backward, an optimizer step).
CheckpointEstimate checkpoint_estimate(const std::vector<CheckpointLayer>& layers) {
  CheckpointEstimate best;
  int64_t total = 0;
  for (const CheckpointLayer& l : layers) total += l.bytes;
  best.before = best.after = total;
  const size_t n = layers.size();
  for (size_t k = 2; 2 * k <= n; ++k) {
    int64_t outputs = 0, largest = 0, segment = 0;
    size_t segments = 0;
    for (size_t i = 0; i < n; ++i) {
      segment += layers[i].bytes;
      if ((i + 1) % k == 0 || i + 1 == n) {
        outputs += layers[i].largest_block;
        largest = std::max(largest, segment);
        segment = 0;
        ++segments;
      }
    }
    const int64_t after = std::min(total, outputs + largest);
    if (after < best.after) best = {k, segments, total, after, outputs, largest};
  }
  return best;
}

// Note [Activation-dominated peak]
// At the allocated peak of a device (the first time it is reached), the blocks of category
// `activation` (saved for backward: recorded by tensorlib, inferred on an imported snapshot)
// are most of what is allocated (at least kMinActivationShare) and at least
// kMinActivationBytes. The finding names the layers holding most of them (by scope, else by
// site) and estimates, by Note [Checkpointing estimate], what checkpointing every k-th layer
// would take off the peak; it is reported when that saving is at least kMinSavedShare of the
// peak (a model already checkpointed keeps little more than one segment and its boundaries,
// and gains little from more). A device where graph-retention fires is left to it (Note [The
// more specific finding] in support.h): activations kept by an accumulated loss
// are a bug to fix, not memory to recompute. Bytes at stake: the estimated saving. Site: the
// largest block of the layer holding the most.
void detect_activation_peak(const Trace& trace, Diagnosis& out) {
  if (std::string why = activations_missing(trace, false); !why.empty())
    return out.skipped.push_back({"activation-peak", why});
  // Checkpointing helps only where backward runs (Note [Phases of the window]): a snapshot's
  // window of forwards alone saved its activations for nothing (grad-in-eval says so).
  if (const WindowPhases w = window_phases(trace); w.known && !w.backward)
    return out.skipped.push_back(
        {"activation-peak",
         "the snapshot's window runs no backward: what its forwards saved is grad-in-eval's"});
  for (const DeviceRef& dev : trace.devices()) {
    // Retained graphs are graph-retention's finding: recomputing them would not help.
    if (graph_retention_on(trace, dev.id)) continue;
    std::optional<TimePoint> at = peak_point(trace, dev.id);
    if (!at) continue;
    std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, *at);
    int64_t peak_bytes = 0, act_bytes = 0;
    std::vector<const store::AllocationRow*> acts;
    for (const store::AllocationRow& r : live) {
      peak_bytes += static_cast<int64_t>(r.size);
      if (r.category == events::Category::activation) {
        act_bytes += static_cast<int64_t>(r.size);
        acts.push_back(&r);
      }
    }
    if (act_bytes < kMinActivationBytes ||
        static_cast<double>(act_bytes) < kMinActivationShare * static_cast<double>(peak_bytes))
      continue;
    std::sort(acts.begin(), acts.end(),
              [](const auto* a, const auto* b) { return a->seq < b->seq; });

    // Layers in forward order (runs of one key), and the holders by key.
    std::vector<CheckpointLayer> layers;
    std::string run_key;
    struct Holder {
      std::string label;
      int64_t bytes = 0, largest = 0;
      uint64_t count = 0, stack = 0;
    };
    std::map<std::string, Holder> holders;
    for (const store::AllocationRow* r : acts) {
      const std::string key = layer_key(trace, *r);
      const auto bytes = static_cast<int64_t>(r->size);
      if (layers.empty() || key != run_key) layers.push_back({});
      run_key = key;
      layers.back().bytes += bytes;
      layers.back().largest_block = std::max(layers.back().largest_block, bytes);
      Holder& h = holders[key];
      h.bytes += bytes;
      ++h.count;
      if (bytes > h.largest) {  // a site is named by its line holding the largest block
        h.largest = bytes;
        h.stack = r->stack_id;
        h.label = layer_label(trace, *r);
      }
    }
    if (trace.imported_snapshot()) {  // Note [Repeated blocks]
      std::vector<uint64_t> stacks;
      for (const store::AllocationRow* r : acts) stacks.push_back(r->stack_id);
      const std::vector<size_t> starts = repeated_block_starts(stacks);
      if (starts.size() >= kMinLayers) {
        layers.assign(starts.size(), {});
        for (size_t j = 0; j < starts.size(); ++j)
          for (size_t i = starts[j]; i < (j + 1 < starts.size() ? starts[j + 1] : acts.size());
               ++i) {
            const auto bytes = static_cast<int64_t>(acts[i]->size);
            layers[j].bytes += bytes;
            layers[j].largest_block = std::max(layers[j].largest_block, bytes);
          }
      }
    }
    if (layers.size() < kMinLayers) continue;
    const CheckpointEstimate est = checkpoint_estimate(layers);
    const int64_t saved = est.before - est.after;
    if (static_cast<double>(saved) < kMinSavedShare * static_cast<double>(peak_bytes)) continue;

    std::vector<const Holder*> ranked;
    for (const auto& [key, h] : holders) ranked.push_back(&h);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Holder* a, const Holder* b) { return a->bytes > b->bytes; });
    const double share = static_cast<double>(act_bytes) / static_cast<double>(peak_bytes);
    Finding f;
    f.id = "activation-peak";
    f.device = dev.name;
    f.bytes = saved;
    f.title = "activations saved for backward are " + percent(share) + " of the " +
              format_bytes(peak_bytes) + " peak: checkpointing every " + std::to_string(est.k) +
              " layers would save about " + format_bytes(saved);
    set_site(trace, ranked.front()->stack, f);
    f.evidence = {
        {"peak allocated", bytes_text(peak_bytes) + " at " + trace.time_text(at->ts)},
        {"activations at the peak", bytes_text(act_bytes) + " (" + percent(share) + ") in " +
                                        std::to_string(acts.size()) + " allocations"},
        {"layers holding them (in forward order)", std::to_string(layers.size())},
    };
    for (size_t i = 0; i < ranked.size() && i < 5; ++i)
      f.evidence.push_back({"held by " + ranked[i]->label, bytes_text(ranked[i]->bytes) + " in " +
                                                               std::to_string(ranked[i]->count) +
                                                               " allocations"});
    f.evidence.push_back({"checkpointing every " + std::to_string(est.k) + " layers (estimate)",
                          std::to_string(est.segments) + " segments keep " +
                              format_bytes(est.outputs) +
                              " of outputs, one recomputed segment holds at most " +
                              format_bytes(est.largest) + ": activations at the peak " +
                              format_bytes(est.before) + " -> " + format_bytes(est.after)});
    f.evidence.push_back({"peak without that saving (estimate)", bytes_text(peak_bytes - saved)});
    note_inferred(trace, f);
    // Advice fits the run: mixed precision is no news to a run under autocast (its casts,
    // Note [Autocast weight copies], are live at the peak).
    const AutocastCopies casts =
        autocast_weight_copies(trace, live_allocations(trace, dev.id, *at));
    const bool mixed = !casts.seqs.empty() || casts.activation_bytes > 0;
    f.fix = "Recompute activations in backward instead of keeping them: wrap every run of " +
            std::to_string(est.k) + " layers in " +
            (trace.imported_snapshot() ? "torch.utils.checkpoint.checkpoint"
                                       : "tl::checkpoint (torch.utils.checkpoint.checkpoint)") +
            ", for about one more forward pass of compute. Or lower the batch size or sequence "
            "length" +
            (mixed ? " (the run already keeps its activations in 16 bits under autocast)."
                   : ", or keep activations in a narrower dtype (mixed precision).");
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
