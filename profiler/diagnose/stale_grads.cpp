// stale-grads (profiler/diagnose/diagnose.h): the last step's gradients alive through the next
// forward. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// What makes it a finding: the peak without the stale gradients is at least this share lower
// (a moderate finding's, Note [Severity]), and at least kMinStaleSaving.
constexpr double kMinStaleShare = kModerateMemoryShare;
constexpr int64_t kMinStaleSaving = 1 << 20;
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// When backward began, in time order: the autograd engine's `backward` scopes in a tensorlib
// trace; in an imported snapshot, which has no scopes, the allocations the engine made.
std::vector<uint64_t> backward_times(const Trace& trace, int64_t device) {
  std::vector<uint64_t> out;
  if (!trace.imported_snapshot()) {
    for (const store::ScopeRow& s :
         store::scopes_named(trace.reader(), {"backward", "backward(retain_graph)"}))
      out.push_back(s.push_ts);
    return out;
  }
  std::map<uint64_t, bool> memo;
  store::for_each_allocation(
      trace.reader(), {.device = device, .with_stack = true}, store::AllocationOrder::none,
      [&](const store::AllocationSpan& a) {
        auto [it, fresh] = memo.try_emplace(a.stack_id, false);
        if (fresh)
          for (const store::ResolvedFrame& f : trace.resolved_frames(a.stack_id))
            if (is_autograd_engine_frame(f)) it->second = true;
        if (it->second) out.push_back(a.alloc_ts);
      });
  std::sort(out.begin(), out.end());
  return out;
}

// A gradient block: when it was allocated and freed (kNever: never), its bytes.
struct Grad {
  uint64_t alloc_ts = 0, freed_ts = kNever;
  int64_t bytes = 0;
};

// One step's forward, from the step's start to its first backward.
struct Forward {
  int64_t step = 0;
  uint64_t from = 0, to = 0;
};

// What one forward held of the gradients made before it.
struct Stale {
  std::vector<Grad> grads;  // live at the forward's start, made before it; by freed_ts
  int64_t bytes = 0;
  bool freed_in_forward = true;  // all of them freed before its backward: zero_grad after it
};

}  // namespace

// Note [Stale gradients]: a training step needs its gradients from its backward, which makes
// them, to its optimizer step, which reads them. `optimizer.zero_grad()` before the forward
// (set_to_none, PyTorch's default since 2.0) frees them between steps; placed after the
// forward, or with set_to_none=False (zeroed in place, never freed), or left out (they
// accumulate), the last step's gradients stay live while the next forward saves its
// activations, and the forward's peak holds parameters, gradients and activations at once.
// The finding: in the forwards of the device's steps -- from a step's start to its first
// backward (a `backward` scope, or in a snapshot the first allocation the autograd engine
// makes) -- the `gradient` blocks made before the step and still live are taken out of the
// allocated curve; where the peak without them is at least kMinStaleShare and kMinStaleSaving
// lower than the recorded one, the difference is the saving. Backward and the optimizer step
// keep their gradients (backward makes them again), so only the forwards change. It reports
// the stale bytes, the steps that had them, whether they were freed before backward (zero_grad
// after the forward) or not at all, and the peak without them; the site is the allocation of
// the forward at which the most was live. What it cannot see: gradients the trace does not mark
// (a snapshot whose gradients were made before its window reads them as parameters), and
// gradient accumulation marked as one step per micro-batch, where keeping them is the point.
void detect_stale_grads(const Trace& trace, Diagnosis& out) {
  for (const DeviceRef& dev : trace.devices()) {
    const std::vector<StepSpan> steps = steps_of(trace, dev.id);
    if (steps.size() < 2) continue;  // a forward after a backward needs two steps
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!pk || pk->bytes <= 0) continue;
    if (!store::any_allocation(trace.reader(),
                               {.device = dev.id, .category = events::Category::gradient}))
      continue;
    const std::vector<uint64_t> backwards = backward_times(trace, dev.id);
    std::vector<Forward> forwards;
    for (const StepSpan& s : steps) {
      const uint64_t end = s.end_ts.value_or(kNever);
      auto b = std::lower_bound(backwards.begin(), backwards.end(), s.ts);
      if (b == backwards.end() || *b >= end) continue;  // no backward: not a training step
      forwards.push_back({s.number, s.ts, *b});
    }
    if (forwards.empty()) continue;
    // One pass in time order: the gradients, read as the curve goes (memory: the gradients live
    // at once, not every one of the trace), and the allocated curve with the stale ones taken
    // out of each forward. `live`: the gradients allocated so far and not yet freed.
    store::AllocationCursor grads(trace.reader(),
                                  {.device = dev.id, .category = events::Category::gradient},
                                  store::AllocationOrder::alloc_ts_then_seq);
    std::optional<Grad> next_grad;
    auto read_grad = [&] {
      next_grad.reset();
      if (std::optional<store::AllocationSpan> g = grads.next())
        next_grad =
            Grad{g->alloc_ts, g->free_requested_ts.value_or(kNever), static_cast<int64_t>(g->size)};
    };
    read_grad();
    auto by_free = [](const Grad& a, const Grad& b) { return a.freed_ts > b.freed_ts; };
    std::vector<Grad> live;  // a heap: the first to be freed on top
    Stale current, worst_stale;
    size_t fi = 0, freed = 0, had_stale = 0, freed_before_backward = 0;
    bool in_forward = false;
    int64_t without = 0, stale_live = 0, worst_value = -1;
    const Forward* worst = nullptr;
    std::optional<uint64_t> worst_seq;
    uint64_t worst_ts = 0;
    auto enter = [&](const Forward& f) {  // the gradients made before `f` and live at its start
      for (; next_grad && next_grad->alloc_ts < f.from; read_grad()) {
        live.push_back(*next_grad);
        std::push_heap(live.begin(), live.end(), by_free);
      }
      for (; !live.empty() && live.front().freed_ts <= f.from; live.pop_back())
        std::pop_heap(live.begin(), live.end(), by_free);
      current = Stale{live, 0, true};
      std::sort(current.grads.begin(), current.grads.end(),
                [](const Grad& a, const Grad& b) { return a.freed_ts < b.freed_ts; });
      for (const Grad& g : current.grads) {
        current.bytes += g.bytes;
        current.freed_in_forward = current.freed_in_forward && g.freed_ts <= f.to;
      }
      if (!current.grads.empty()) {
        ++had_stale;
        freed_before_backward += current.freed_in_forward ? 1 : 0;
      }
      stale_live = current.bytes;
      freed = 0;
    };
    trace.reader().for_each_lod(
        dev.id, 0, 0, std::numeric_limits<int64_t>::max(), [&](const store::LodRow& row) {
          while (fi < forwards.size() && row.t >= forwards[fi].to) ++fi, in_forward = false;
          int64_t value = row.allocated;
          if (fi < forwards.size() && row.t >= forwards[fi].from) {
            if (!in_forward) enter(forwards[fi]), in_forward = true;
            for (; freed < current.grads.size() && current.grads[freed].freed_ts <= row.t; ++freed)
              stale_live -= current.grads[freed].bytes;
            value -= stale_live;
            if (!current.grads.empty() && row.allocated > worst_value) {
              worst_value = row.allocated, worst = &forwards[fi], worst_seq = row.seq;
              worst_ts = row.t;
              if (worst_stale.grads.size() != current.grads.size() ||
                  worst_stale.bytes != current.bytes)
                worst_stale = current;
            }
          }
          without = std::max(without, value);
          return true;
        });
    const int64_t saving = pk->bytes - without;
    if (!worst || saving < kMinStaleSaving ||
        static_cast<double>(saving) < kMinStaleShare * static_cast<double>(pk->bytes))
      continue;
    Finding f;
    f.id = "stale-grads";
    f.device = dev.name;
    f.bytes = saving;
    f.title = "the last step's gradients (" + format_bytes(worst_stale.bytes) +
              ") are still live in the next step's forward: the peak would be " +
              format_bytes(without) + " without them";
    if (worst_seq) {
      if (std::optional<store::AllocationSpan> at = store::first_allocation(
              trace.reader(), {.device = dev.id, .seq = *worst_seq}, store::AllocationOrder::none))
        set_site(trace, at->stack_id, f);
    }
    f.evidence = {
        {"phase", "forward of a training step, before its backward"},
        {"peak allocated", bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
        {"gradients from earlier steps live in a forward",
         bytes_text(worst_stale.bytes) + " in " + std::to_string(worst_stale.grads.size()) +
             " allocations (step " + std::to_string(worst->step) + ", at " +
             trace.time_text(worst_ts) + ")"},
        {"steps whose forward had them",
         std::to_string(had_stale) + " of " + std::to_string(steps.size())},
        {"freed before the step's backward",
         freed_before_backward == had_stale ? "yes: zeroed after the forward"
         : freed_before_backward == 0 ? "no: zeroed in place (set_to_none=False) or never zeroed"
                                      : std::to_string(freed_before_backward) + " of " +
                                            std::to_string(had_stale) + " steps"},
        {"peak without them", bytes_text(without)}};
    note_inferred(trace, f);
    f.fix = freed_before_backward == had_stale
                ? "Call optimizer.zero_grad() before the forward, not after it (tl: "
                  "optimizer.zero_grad() before model(x)): the gradients are then freed before "
                  "the forward saves its activations, and backward makes them again."
                : "Call optimizer.zero_grad() (set_to_none=True, the default) at the start of "
                  "each step, before the forward: zeroing in place (set_to_none=False) keeps "
                  "every gradient allocated, and never zeroing accumulates them across steps.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
