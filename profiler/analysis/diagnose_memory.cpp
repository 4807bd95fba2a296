// Detectors of graphs, leaks and syncs (profiler/analysis/diagnose.h): graph-retention,
// retained-graph, grad-in-eval, leak and sync-in-loop. docs/diagnoses.md gives each one's
// evidence and thresholds; the notes below say why they are what they are.
//
// Note [Activations in the trace]
// tensorlib marks a block `activation` when autograd saves a tensor in it for backward
// (Note [Autograd memory categories] in tensorlib/autograd/node.cpp), and the engine runs
// backward inside a scope named "backward" or "backward(retain_graph)". An allocation row's
// category is the block's latest one while it was allocated, so a parameter saved by a graph
// that died without backward stays `activation` for its whole life: the detectors look at
// *when* activation blocks live (across step boundaries, across a backward), never at the
// category alone.
//
// Note [The more specific finding]
// One pitfall can satisfy several detectors: an accumulated loss grows memory (leak) with
// activations that no backward ever uses (grad-in-eval). Each detector recomputes the
// graph-retention test for the device itself (so `--only` gives the same answer as a full
// run) and, where graph-retention fires, leaves the activations to it: grad-in-eval reports
// nothing on that device, and leak looks only at memory other than activations.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis/diagnose.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/naming/units.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"
#include "profiler/store/tensor_tables.h"

namespace tidemark::analysis::detail {

namespace {

constexpr uint64_t kOpen = ~uint64_t{0};  // an end time that never came (NULL in the trace)

// Thresholds (docs/diagnoses.md says why).
constexpr int64_t kMinRetainedBytes = 64 << 10;     // retained-graph: stale activations
constexpr double kMinRetainedShare = 0.01;          // ... of the step's peak
constexpr int64_t kMinUnusedActivations = 1 << 20;  // grad-in-eval: saved at the region peak
// grad-in-eval on a snapshot: blocks saved at once. A forward with grad mode on saves tensors
// in every layer (a 12-layer model: hundreds); one under no_grad keeps only what it returns
// (its output, a cache: a handful), which the importer's rules may read as saved too.
constexpr size_t kMinSavedBlocks = 32;
constexpr int64_t kMinLeakedAtEnd = 1 << 20;  // leak: still allocated at the end
constexpr size_t kMinCompleteSteps = 5;       // sync-in-loop: a loop, not a few calls
constexpr double kSyncStepShare = 0.9;        // ... "nearly every" complete step

// ---- small helpers -------------------------------------------------------------------------

std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}
std::string bytes_text(int64_t b) {
  return format_bytes(b) + " (" + with_commas(b) + " bytes)";
}
std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

constexpr const char* kSnapshotNoCategories =
    "the trace is an imported PyTorch snapshot: it has no tensor records, and PyTorch's own "
    "snapshots mark no block as an activation (none were inferred), so activations saved for "
    "backward cannot be recognised";

constexpr const char* kSnapshotNoBackward =
    "the trace is an imported PyTorch snapshot: its categories are inferred (activations "
    "included), but it has no backward scopes to tell a training step from an evaluation";

struct Step {
  int64_t number = 0;
  uint64_t ts = 0, end_ts = kOpen;  // end_ts: the next step's start; kOpen for the last
};
// Every step, or a device's (its rank's in a merged trace: Note [Steps of a rank]).
std::vector<Step> load_steps(const Trace& t, std::optional<int64_t> device = std::nullopt) {
  std::vector<Step> out;
  for (const StepSpan& s : steps_of(t, device))
    out.push_back({s.number, s.ts, s.end_ts.value_or(kOpen)});
  return out;
}
constexpr const char* kNoSteps =
    "the trace has no steps (mark each iteration with tl::profiler::step()), so a loop cannot "
    "be told apart from the rest of the program";

struct Block {
  int64_t bytes = 0;
  uint64_t alloc_ts = 0, free_ts = kOpen;  // free_requested_ts; kOpen: allocated at the end
  uint64_t stack = 0;
  bool activation = false;
  uint64_t seq = 0;  // the allocation's
};
// Allocation rows of a device, in allocation order (`activations_only`: category activation).
std::vector<Block> load_blocks(const Trace& t, int64_t device, bool activations_only) {
  std::vector<Block> out;
  store::AllocationFilter filter{.device = device};
  if (activations_only) filter.category = events::Category::activation;
  store::for_each_allocation(t.reader(), filter, store::AllocationOrder::seq,
                             [&](const store::AllocationSpan& a) {
                               out.push_back({static_cast<int64_t>(a.size), a.alloc_ts,
                                              a.free_requested_ts.value_or(kOpen), a.stack_id,
                                              a.category == events::Category::activation, a.seq});
                             });
  return out;
}

// Bytes of `blocks` live at each of `times` (sorted): allocated before it, not freed by it.
std::vector<int64_t> live_bytes_at(const std::vector<Block>& blocks,
                                   const std::vector<uint64_t>& times) {
  std::vector<std::pair<uint64_t, int64_t>> allocs, frees;
  for (const Block& b : blocks) {
    allocs.emplace_back(b.alloc_ts, b.bytes);
    if (b.free_ts != kOpen) frees.emplace_back(b.free_ts, b.bytes);
  }
  std::sort(allocs.begin(), allocs.end());
  std::sort(frees.begin(), frees.end());
  std::vector<int64_t> out;
  size_t ia = 0, ifr = 0;
  int64_t live = 0;
  for (uint64_t ts : times) {
    for (; ia < allocs.size() && allocs[ia].first < ts; ++ia) live += allocs[ia].second;
    for (; ifr < frees.size() && frees[ifr].first <= ts; ++ifr) live -= frees[ifr].second;
    out.push_back(live);
  }
  return out;
}

// The site holding the most bytes among `blocks`, and a stack that shows it.
struct TopSite {
  std::string label;
  uint64_t stack = 0;
  int64_t bytes = 0;
  uint64_t count = 0;
};
TopSite top_site(const Trace& t, const std::vector<const Block*>& blocks) {
  std::map<std::string, TopSite> by_key;
  std::map<std::string, int64_t> biggest;
  for (const Block* b : blocks) {
    const Site& s = t.site(b->stack);
    TopSite& ts = by_key[s.key];
    ts.label = s.label;
    ts.bytes += b->bytes;
    ++ts.count;
    if (b->bytes > biggest[s.key]) biggest[s.key] = b->bytes, ts.stack = b->stack;
  }
  TopSite best;
  for (auto& [key, s] : by_key)
    if (s.bytes > best.bytes) best = s;
  return best;
}
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

void set_site(const Trace& t, Finding& f, uint64_t stack) {
  if (!stack) return;  // no stacks recorded: the site stays empty (diagnose.h)
  f.site = t.site(stack).label;
  f.stack = t.stack_frames(stack);
}

// ---- graph-retention, shared -----------------------------------------------------------------

// Live activation bytes at each step boundary and the fit through them (Note [Growth]).
Growth activation_growth(const std::vector<Block>& activations, const std::vector<Step>& steps) {
  std::vector<uint64_t> times;
  for (const Step& s : steps) times.push_back(s.ts);
  std::vector<int64_t> live = live_bytes_at(activations, times);
  std::vector<std::pair<int64_t, int64_t>> b;
  for (size_t i = 0; i < steps.size(); ++i) b.emplace_back(steps[i].number, live[i]);
  return fit_growth(std::move(b));
}

// Whether graph-retention fires on `device` (Note [The more specific finding]).
bool graph_retained(const Trace& t, int64_t device, const std::vector<Step>& steps) {
  if (steps.empty()) return false;
  return activation_growth(load_blocks(t, device, true), steps).growing;
}

std::vector<std::pair<uint64_t, uint64_t>> backward_scopes(const Trace& t, bool retain_only) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const std::vector<std::string> names =
      retain_only ? std::vector<std::string>{"backward(retain_graph)"}
                  : std::vector<std::string>{"backward", "backward(retain_graph)"};
  for (const store::ScopeRow& s : store::scopes_named(t.reader(), names))
    out.emplace_back(s.push_ts, s.pop_ts.value_or(kOpen));
  return out;
}

}  // namespace

// Without the engine's `backward` scopes, a snapshot whose categories were inferred (Note
// [Inferred categories] in profiler/importers/infer.cpp) is read like a recorded trace.
std::string activations_missing(const Trace& t, bool backward) {
  if (t.imported_snapshot() && t.categories_inferred().empty()) return kSnapshotNoCategories;
  if (t.imported_snapshot() && backward) return kSnapshotNoBackward;
  if (!store::any_allocation(t.reader(), {.categorized = true}) && !store::any_tensor(t.reader()))
    return "the trace has neither memory categories nor tensor records (a program not built on "
           "tensorlib), so activations saved for backward cannot be recognised";
  return {};
}

bool graph_retention_on(const Trace& t, int64_t device) {
  return graph_retained(t, device, load_steps(t, device));
}

// ---- graph-retention -----------------------------------------------------------------------

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
    set_site(trace, f, site.stack);
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

// ---- retained-graph ------------------------------------------------------------------------

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
    set_site(trace, f, site.stack);
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

// ---- grad-in-eval --------------------------------------------------------------------------

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
    set_site(trace, f, site.stack);
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
    set_site(trace, f, site.stack);
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

// ---- leak ----------------------------------------------------------------------------------

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
      set_site(trace, f, site.stack);
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
      set_site(trace, f, site.stack);
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

// ---- sync-in-loop --------------------------------------------------------------------------

void detect_sync_in_loop(const Trace& trace, Diagnosis& out) {
  if (trace.imported_snapshot())
    return out.skipped.push_back(
        {"sync-in-loop", "the trace is an imported PyTorch snapshot: it records no syncs"});
  const std::vector<Step> steps = load_steps(trace);
  if (steps.empty()) return out.skipped.push_back({"sync-in-loop", kNoSteps});
  // Note [The open last step] (steps.cpp): only complete steps count.
  std::vector<Step> complete;
  for (const Step& s : steps)
    if (s.end_ts != kOpen) complete.push_back(s);
  if (complete.size() < kMinCompleteSteps)
    return out.skipped.push_back(
        {"sync-in-loop", "the trace has " + std::to_string(complete.size()) +
                             " complete steps; a per-step pattern needs at least " +
                             std::to_string(kMinCompleteSteps)});
  struct PerSite {
    std::string label, device;
    uint64_t stack = 0, count = 0, in_complete = 0, total_ns = 0;
    std::map<std::string, uint64_t> kinds;
    std::map<int64_t, bool> steps;
  };
  std::map<std::string, PerSite> sites;
  size_t si = 0;
  store::for_each_sync(trace.reader(), [&](const store::SyncRow& q) {
    const uint64_t stack = q.stack_id, ts = q.ts;
    const Site& site = trace.site(stack);
    PerSite& p = sites[site.key];
    if (!p.count) {
      p.label = site.label;
      p.stack = stack;
      const DeviceRef* dev = trace.device_by_id(q.device);
      p.device = dev ? dev->name : "";
    }
    ++p.count;
    p.total_ns += q.duration_ns;
    ++p.kinds[q.kind];
    while (si < complete.size() && complete[si].end_ts <= ts) ++si;
    if (si < complete.size() && complete[si].ts <= ts) {
      ++p.in_complete;
      p.steps[complete[si].number] = true;
    }
  });
  std::vector<Finding> found;
  for (auto& [key, p] : sites) {
    const size_t with = p.steps.size();
    if (static_cast<double>(with) < kSyncStepShare * static_cast<double>(complete.size())) continue;
    std::string kind;
    uint64_t best = 0;
    for (const auto& [k, n] : p.kinds)
      if (n > best) best = n, kind = k;
    Finding f;
    f.id = "sync-in-loop";
    f.device = p.device;  // the device the host waited for
    f.title = "the host waits on the device (" + kind + ") at the same site in " +
              std::to_string(with) + " of " + std::to_string(complete.size()) + " steps";
    f.time_ns = p.total_ns;
    set_site(trace, f, p.stack);
    f.evidence = {
        {"steps with a sync here",
         std::to_string(with) + " of " + std::to_string(complete.size()) + " complete steps"},
        {"syncs per step", fixed2(static_cast<double>(p.in_complete) / static_cast<double>(with))},
        {"syncs at the site", std::to_string(p.count)},
        {"time waited", format_duration(p.total_ns)},
        {"kind", kind},
    };
    f.fix =
        "Keep the value on the device: accumulate `running += loss.detach()` and read it "
        "with .item() every N steps or once per epoch; every .item(), .cpu() or print of a "
        "device tensor makes the host wait for all queued work.";
    found.push_back(std::move(f));
  }
  for (Finding& f : found) out.findings.push_back(std::move(f));
}

}  // namespace tidemark::analysis::detail
