// grad-in-eval (profiler/diagnose/diagnose.h): activations saved for a backward that never
// runs (evaluation or inference with grad mode on). docs/diagnoses.md gives its evidence and
// thresholds.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// Thresholds (docs/diagnoses.md says why).
constexpr int64_t kMinUnusedActivations = 1 << 20;  // saved at the region peak
// grad-in-eval on a snapshot: blocks saved at once. A forward with grad mode on saves tensors
// in every layer (a 12-layer model: hundreds); one under no_grad keeps only what it returns
// (its output, a cache: a handful), which the importer's rules may read as saved too.
constexpr size_t kMinSavedBlocks = 32;

// The moment the most of `blocks` are live at once (allocs and frees swept in time order,
// frees first at a tie; a block never freed stays live), their bytes then and the blocks.
struct JointPeak {
  int64_t bytes = 0;
  uint64_t ts = 0;
  std::vector<const Block*> blocks;
};
JointPeak joint_peak(const std::vector<const Block*>& blocks) {
  std::vector<std::pair<uint64_t, int64_t>> deltas;
  for (const Block* b : blocks) {
    deltas.emplace_back(b->alloc_ts, b->bytes);
    if (b->free_ts != kOpen) deltas.emplace_back(b->free_ts, -b->bytes);
  }
  std::sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  JointPeak p;
  int64_t live = 0;
  for (const auto& [ts, delta] : deltas) {
    live += delta;
    if (live > p.bytes) p.bytes = live, p.ts = ts;
  }
  for (const Block* b : blocks)
    if (b->alloc_ts <= p.ts && b->free_ts > p.ts) p.blocks.push_back(b);
  return p;
}

// Whether a stack runs inside a module's forward: a frame of torch/nn (Windows' '\' read as
// '/') or of tensorlib's nn, or a function named `forward`. `memo`: the answers so far, by stack.
bool in_module_forward(const Trace& t, uint64_t stack, std::map<uint64_t, bool>& memo) {
  if (stack == 0) return false;
  auto [it, fresh] = memo.try_emplace(stack, false);
  if (!fresh) return it->second;
  for (const store::ResolvedFrame& r : t.resolved_frames(stack)) {
    std::string file = r.file;
    std::replace(file.begin(), file.end(), '\\', '/');
    if (file.find("torch/nn/") != std::string::npos ||
        r.function.find("tl::nn::") != std::string::npos || r.function == "forward" ||
        r.function.ends_with("::forward"))
      return it->second = true;
  }
  return false;
}

// Note [grad-in-eval on a snapshot]: a snapshot has no backward scopes, but the importer's
// phases say whether its window ran backward at all (Note [Phases of the window]). When it
// ran forwards and no backward, every block a forward saved (an inferred `activation`: kept
// past its forward by the graph, Note [Inferred categories]) waits for a backward the window
// never runs: the forward runs with grad mode on where it needs none (an evaluation, an
// inference, a forward-only benchmark). Those still live when the snapshot was taken count
// too -- the graph is still referenced then (a `logits` kept past the forward) -- and the
// finding says how many. A window that ran backward uses its activations (activation-peak's
// business); so does a tensorlib trace, whose scopes say exactly when backward ran.
void grad_in_eval_snapshot(const Trace& trace, Diagnosis& out) {
  const WindowPhases w = window_phases(trace);
  if (!w.known || !w.forward)
    return out.skipped.push_back({"grad-in-eval", "the snapshot's frames show no forward pass"});
  if (w.backward) return;  // its activations are used: nothing to report
  // A window that ran out of memory ended before a backward could come: a training step that
  // failed in its forward, not a forward that needed no graph.
  if (!store::allocator_events(trace.reader(), "oom").empty())
    return out.skipped.push_back(
        {"grad-in-eval",
         "the snapshot ran out of memory: its window ended before a backward could run"});
  for (const DeviceRef& d : trace.devices()) {
    // Gradients or an optimizer's state live say the program trains (Note [A training
    // forward]): this forward's backward comes after the snapshot.
    if (trains(trace, d.id)) {
      if (out.skipped.empty() || out.skipped.back().id != "grad-in-eval")
        out.skipped.push_back(
            {"grad-in-eval",
             "gradients or optimizer state are live in the window: the program trains, and the "
             "backward of its forward comes after the snapshot"});
      continue;
    }
    // Saved by a module's forward: what the program's own code made between forwards (an
    // optimizer's or estimator's state, a batch) is no graph's, whatever the lifetimes say.
    const std::vector<Block> blocks = load_blocks(trace, d.id, true);
    std::vector<const Block*> acts;
    std::map<uint64_t, bool> memo;
    for (const Block& b : blocks)
      if (in_module_forward(trace, b.stack, memo)) acts.push_back(&b);
    const JointPeak jp = joint_peak(acts);
    // Autocast's weight copies among them stay under no_grad too (Note [Autocast weight
    // copies]): what no_grad frees is the rest.
    const AutocastCopies copies =
        autocast_weight_copies(trace, live_allocations(trace, d.id, TimePoint{jp.ts, {}}));
    std::vector<const Block*> at_peak;
    int64_t peak = 0;
    for (const Block* b : jp.blocks)
      if (!copies.seqs.count(b->seq)) at_peak.push_back(b), peak += b->bytes;
    size_t open_at_end = 0;
    int64_t open_bytes = 0;
    for (const Block* b : acts)
      if (b->free_ts == kOpen) ++open_at_end, open_bytes += b->bytes;
    if (peak < kMinUnusedActivations || at_peak.size() < kMinSavedBlocks) continue;
    const TopSite site = top_site(trace, at_peak);
    Finding f;
    f.id = "grad-in-eval";
    f.device = d.name;
    f.title = "a forward with grad mode on saved " + format_bytes(peak) +
              " for a backward this window never runs (evaluation, inference or a forward-only "
              "benchmark?)";
    f.bytes = peak;
    set_site(trace, site.stack, f);
    f.evidence = {
        {"phase", "forward passes with grad mode on, no backward (inferred from the frames)"},
        {"saved for backward at their peak", bytes_text(peak) + " in " +
                                                 std::to_string(at_peak.size()) +
                                                 " allocations at " + trace.time_text(jp.ts)},
        {"from the top site at the peak",
         bytes_text(site.bytes) + " in " + std::to_string(site.count) + " allocations"},
    };
    if (copies.bytes > 0)
      f.evidence.emplace_back(
          "autocast's weight copies beside them, which no_grad keeps for the "
          "autocast region (autocast-cache)",
          bytes_text(copies.bytes) + " in " + std::to_string(copies.seqs.size()) + " allocations");
    if (open_at_end > 0)
      f.evidence.emplace_back(
          "still saved when the snapshot was taken",
          bytes_text(open_bytes) + " in " + std::to_string(open_at_end) +
              " allocations (the output, and with it the graph, is still referenced)");
    note_inferred(trace, f);
    f.fix =
        "If nothing calls backward on it, run the forward under torch.no_grad() or "
        "torch.inference_mode() (tl::NoGradGuard): the saved tensors are then freed layer by layer "
        "(a compiled model's too). model.eval() alone does not stop autograd from saving them.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace

void detect_grad_in_eval(const Trace& trace, Diagnosis& out) {
  if (trace.imported_snapshot() && !trace.categories_inferred().empty())
    return grad_in_eval_snapshot(trace, out);
  if (std::string why = activations_missing(trace, true); !why.empty())
    return out.skipped.push_back({"grad-in-eval", why});
  const std::vector<Step> steps = load_steps(trace);
  const auto backwards = backward_scopes(trace, false);  // by push time
  std::vector<uint64_t> pushes, latest_pop;  // latest_pop[i]: the latest pop of scopes 0..i
  for (const auto& [push, pop] : backwards) {
    pushes.push_back(push);
    latest_pop.push_back(latest_pop.empty() ? pop : std::max(latest_pop.back(), pop));
  }
  // A backward overlaps [t0, t1]: one began by t1 and had not ended before t0.
  auto backward_during = [&](uint64_t t0, uint64_t t1) {
    auto n = std::upper_bound(pushes.begin(), pushes.end(), t1) - pushes.begin();
    return n > 0 && latest_pop[static_cast<size_t>(n - 1)] >= t0;
  };
  std::vector<uint64_t> starts;
  for (const Step& s : steps) starts.push_back(s.ts);
  // The step holding `ts` (index into steps), or -1 before the first.
  auto step_of = [&](uint64_t ts) {
    return std::upper_bound(starts.begin(), starts.end(), ts) - starts.begin() - 1;
  };
  for (const DeviceRef& d : trace.devices()) {
    if (graph_retained(trace, d.id, steps)) continue;  // Note [The more specific finding]
    const std::vector<Block> acts = load_blocks(trace, d.id, true);
    // Saved, then freed with no backward in between, within one step: a graph built and
    // dropped unused. (A block living across steps is a parameter or a retained graph.)
    std::vector<const Block*> unused;
    for (const Block& b : acts)
      if (b.free_ts != kOpen && !backward_during(b.alloc_ts, b.free_ts) &&
          step_of(b.alloc_ts) == step_of(b.free_ts))
        unused.push_back(&b);
    if (unused.empty()) continue;
    const JointPeak jp = joint_peak(unused);  // every one of them was freed
    const int64_t peak = jp.bytes;
    if (peak < kMinUnusedActivations) continue;
    const std::vector<const Block*>& at_peak = jp.blocks;
    const TopSite site = top_site(trace, at_peak);
    std::set<int64_t> in_steps;  // indices of the steps holding such activations
    for (const Block* b : unused)
      if (auto i = step_of(b->alloc_ts); i >= 0) in_steps.insert(i);

    Finding f;
    f.id = "grad-in-eval";
    f.device = d.name;
    f.title =
        "activations saved for a backward that never runs (evaluation or inference with "
        "grad mode on): up to " +
        format_bytes(peak) + " at once";
    f.bytes = peak;
    set_site(trace, site.stack, f);
    f.evidence = {
        {"saved for backward at their peak",
         bytes_text(peak) + " in " + std::to_string(at_peak.size()) + " allocations"},
        {"allocations saved and freed with no backward", std::to_string(unused.size())},
        {"from the top site at the peak", bytes_text(site.bytes)},
    };
    if (!steps.empty())
      f.evidence.emplace_back("steps affected", std::to_string(in_steps.size()) + " of " +
                                                    std::to_string(steps.size()));
    f.fix =
        "Run evaluation and inference under tl::NoGradGuard (torch.no_grad()) or "
        "tl::InferenceMode (torch.inference_mode()); model.eval() alone does not stop "
        "autograd from saving activations.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
