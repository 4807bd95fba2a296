// stale-grads (profiler/diagnose/diagnose.h): the last step's gradients alive through the next
// forward. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
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
// trace; in an imported snapshot, which has no scopes, the allocations backward's frames made
// (is_backward_call_frame).
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
            if (analysis::is_backward_call_frame(f)) it->second = true;
        if (it->second) out.push_back(a.alloc_ts);
      });
  std::sort(out.begin(), out.end());
  return out;
}

// A gradient block: when it was allocated and freed (kNever: never), its bytes, and the bytes
// asked for (its tensor's: what its parameter's block was asked for too).
struct Grad {
  uint64_t alloc_ts = 0, freed_ts = kNever;
  int64_t bytes = 0;
  uint64_t asked = 0;
};

uint64_t asked(const store::AllocationSpan& a) {
  return a.requested_size ? a.requested_size : a.size;
}

// One step's forward, from the step's start to its first backward; the step ends at `end`.
struct Forward {
  int64_t step = 0;
  uint64_t from = 0, to = 0, end = 0;
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
// makes) -- the `gradient` blocks made before the step, still live, and of a parameter's size
// (a gradient has its parameter's) are taken out of the
// allocated curve; where the peak without them is at least kMinStaleShare and kMinStaleSaving
// lower than the recorded one, the difference is the saving. Backward makes them again as it
// goes: from the step's first backward on, each allocation of a stale gradient's size (the
// gradient made, or the temporary an in-place accumulation adds and frees) counts one back,
// until all are, so the curve of backward and the optimizer step falls only by those not
// made yet. It reports
// the stale bytes, the steps that had them, whether they were freed before backward (zero_grad
// after the forward) or not at all, and the peak without them; the site is the allocation of
// the forward at which the most was live.
//
// A window of less than two steps -- what most snapshots hold: one step, or one forward dumped
// before its backward -- has one forward, from the window's start to its first backward, or to
// its end when the snapshot's frames show a forward and no backward. The gradients live in it
// were made before the window: a snapshot's blocks from before its history, which the importer
// tells from the parameters and the optimizer's state by their sizes (Note [State before the
// history] in profiler/importers/infer.cpp: four equal groups, a parameter, its gradient and
// Adam's two moments, or a zero_grad in the window freeing them). A forward whose window ends
// before its backward cannot show whether zero_grad comes after it; the fix then is the
// general one.
//
// What it cannot see: gradients the trace does not mark (a snapshot of a program with plain
// SGD, whose parameters and gradients come in two groups like a model with two of everything),
// and gradient accumulation marked as one step per micro-batch, where keeping them is the point.
void detect_stale_grads(const Trace& trace, Diagnosis& out) {
  const WindowPhases phases = window_phases(trace);
  for (const DeviceRef& dev : trace.devices()) {
    const std::vector<StepSpan> steps = steps_of(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!pk || pk->bytes <= 0) continue;
    if (!store::any_allocation(trace.reader(),
                               {.device = dev.id, .category = events::Category::gradient}))
      continue;
    const std::vector<uint64_t> backwards = backward_times(trace, dev.id);
    std::vector<Forward> forwards;
    bool ends_before_backward = false;  // the window's one forward has no backward after it
    if (steps.size() < 2) {
      // The blocks from before a snapshot's history are allocated at the trace's origin: the
      // window's forward begins just after them.
      const uint64_t from = trace.origin_ns() + 1;
      auto b = std::lower_bound(backwards.begin(), backwards.end(), from);
      if (b != backwards.end()) {
        forwards.push_back({steps.empty() ? 1 : steps.front().number, from, *b, kNever});
      } else if (phases.known && phases.forward) {
        forwards.push_back(
            {steps.empty() ? 1 : steps.front().number, from, trace.end_ns() + 1, kNever});
        ends_before_backward = true;
      }
    }
    for (const StepSpan& s : steps) {
      if (steps.size() < 2) break;  // a forward after a backward needs two steps
      const uint64_t end = s.end_ts.value_or(kNever);
      auto b = std::lower_bound(backwards.begin(), backwards.end(), s.ts);
      if (b == backwards.end() || *b >= end) continue;  // no backward: not a training step
      forwards.push_back({s.number, s.ts, *b, end});
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
        next_grad = Grad{g->alloc_ts, g->free_requested_ts.value_or(kNever),
                         static_cast<int64_t>(g->size), asked(*g)};
    };
    read_grad();
    auto by_free = [](const Grad& a, const Grad& b) { return a.freed_ts > b.freed_ts; };
    std::vector<Grad> live;  // a heap: the first to be freed on top
    // A gradient has its parameter's size: a block of another size made in backward (the
    // cuBLAS workspace of the autograd engine's thread, kept for the process) is none.
    std::set<uint64_t> parameter_sizes;
    store::for_each_allocation(
        trace.reader(), {.device = dev.id, .category = events::Category::parameter},
        store::AllocationOrder::none,
        [&](const store::AllocationSpan& a) { parameter_sizes.insert(asked(a)); });
    // Every allocation, read as the curve goes through a step's backward: those of a stale
    // gradient's size are backward making it again (`remade`: their bytes so far, each size as
    // many times as it has stale gradients, `to_remake`).
    store::AllocationCursor all(trace.reader(), {.device = dev.id},
                                store::AllocationOrder::alloc_ts_then_seq);
    std::optional<store::AllocationSpan> next_any = all.next();
    std::map<uint64_t, size_t> to_remake;
    int64_t remade = 0;
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
      current = Stale{{}, 0, true};
      for (const Grad& g : live)
        if (parameter_sizes.count(g.asked)) current.grads.push_back(g);
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
      to_remake.clear();
      for (const Grad& g : current.grads) ++to_remake[g.asked];
      remade = 0;
    };
    trace.reader().for_each_lod(
        dev.id, 0, 0, std::numeric_limits<int64_t>::max(), [&](const store::LodRow& row) {
          while (fi < forwards.size() && row.t >= forwards[fi].end) ++fi, in_forward = false;
          int64_t value = row.allocated;
          if (fi < forwards.size() && row.t >= forwards[fi].from) {
            const Forward& f = forwards[fi];
            if (!in_forward) enter(f), in_forward = true;
            for (; freed < current.grads.size() && current.grads[freed].freed_ts <= row.t; ++freed)
              stale_live -= current.grads[freed].bytes;
            for (; next_any && next_any->alloc_ts <= row.t; next_any = all.next()) {
              if (next_any->alloc_ts < f.to) continue;
              auto r = to_remake.find(asked(*next_any));
              if (r != to_remake.end() && r->second > 0)
                --r->second, remade += static_cast<int64_t>(next_any->size);
            }
            value = std::min(value, value - stale_live + remade);
            if (row.t >= f.to) {  // the step's backward: its peak is no forward's
              without = std::max(without, value);
              return true;
            }
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
         std::to_string(had_stale) + " of " + std::to_string(std::max<size_t>(1, steps.size()))},
        {"freed before the step's backward",
         ends_before_backward                 ? "not known: the window ends before the backward"
         : freed_before_backward == had_stale ? "yes: zeroed after the forward"
         : freed_before_backward == 0 ? "no: zeroed in place (set_to_none=False) or never zeroed"
                                      : std::to_string(freed_before_backward) + " of " +
                                            std::to_string(had_stale) + " steps"},
        {"peak without them", bytes_text(without)}};
    note_inferred(trace, f);
    f.fix = freed_before_backward == had_stale && !ends_before_backward
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
