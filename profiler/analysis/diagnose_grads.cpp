// stale-grads (profiler/analysis/diagnose.h): the last step's gradients alive through the next
// forward. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/diagnose_allocator_support.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"

namespace tidemark::analysis::detail {

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
    Stmt q(trace.db(),
           "SELECT c.push_ts FROM scopes c JOIN strings s ON s.id = c.name WHERE s.text IN "
           "('backward', 'backward(retain_graph)') ORDER BY c.push_ts");
    while (q.step()) out.push_back(q.u64(0));
    return out;
  }
  std::map<uint64_t, bool> memo;
  for (const store::AllocationRow& r : live_in_range(trace, device, 0, kNever)) {
    if (!r.stack_id) continue;
    auto [it, fresh] = memo.try_emplace(r.stack_id, false);
    if (fresh)
      for (const store::ResolvedFrame& f : trace.resolved_frames(r.stack_id))
        if (is_autograd_engine_frame(f)) it->second = true;
    if (it->second) out.push_back(r.alloc_ts);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One step's forward, from the step's start to its first backward, and the gradients made
// before the step that are live at its start.
struct Forward {
  int64_t step = 0;
  uint64_t from = 0, to = 0;
  std::vector<store::AllocationRow> stale;  // by free_requested_ts (never freed: last)
  int64_t stale_bytes = 0;
  bool freed_in_forward = false;  // all of them freed before its backward: zero_grad after it
};

uint64_t freed_at(const store::AllocationRow& r) {
  return r.free_requested_ts.value_or(kNever);
}

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
    std::vector<store::AllocationRow> grads = trace.reader().allocations_where(
        "WHERE device = ?1 AND category = 'gradient' ORDER BY seq", {dev.id});
    if (grads.empty()) continue;
    const std::vector<uint64_t> backwards = backward_times(trace, dev.id);
    std::vector<Forward> forwards;
    for (const StepSpan& s : steps) {
      const uint64_t end = s.end_ts.value_or(kNever);
      auto b = std::lower_bound(backwards.begin(), backwards.end(), s.ts);
      if (b == backwards.end() || *b >= end) continue;  // no backward: not a training step
      Forward f{s.number, s.ts, *b, {}, 0, true};
      for (const store::AllocationRow& g : grads)
        if (g.alloc_ts < s.ts && freed_at(g) > s.ts) {
          f.stale.push_back(g);
          f.stale_bytes += static_cast<int64_t>(g.size);
          f.freed_in_forward = f.freed_in_forward && freed_at(g) <= f.to;
        }
      if (f.stale.empty()) continue;
      std::sort(f.stale.begin(), f.stale.end(),
                [](const auto& a, const auto& b) { return freed_at(a) < freed_at(b); });
      forwards.push_back(std::move(f));
    }
    if (forwards.empty()) continue;
    // The allocated curve with the stale gradients taken out of the forwards: its highest
    // value, and the forward (and its moment) where the most was live with them.
    int64_t without = 0, worst_value = -1;
    const Forward* worst = nullptr;
    std::optional<uint64_t> worst_seq;
    uint64_t worst_ts = 0;
    size_t fi = 0, freed = 0;
    int64_t stale_live = 0;
    trace.reader().for_each_lod(
        dev.id, 0, 0, std::numeric_limits<int64_t>::max(), [&](const store::LodRow& row) {
          while (fi < forwards.size() && row.t >= forwards[fi].to) ++fi, freed = 0;
          int64_t value = row.allocated;
          if (fi < forwards.size() && row.t >= forwards[fi].from) {
            const Forward& f = forwards[fi];
            if (freed == 0) stale_live = f.stale_bytes;
            for (; freed < f.stale.size() && freed_at(f.stale[freed]) <= row.t; ++freed)
              stale_live -= static_cast<int64_t>(f.stale[freed].size);
            value -= stale_live;
            if (row.allocated > worst_value)
              worst_value = row.allocated, worst = &f, worst_seq = row.seq, worst_ts = row.t;
          }
          without = std::max(without, value);
          return true;
        });
    const int64_t saving = pk->bytes - without;
    if (!worst || saving < kMinStaleSaving ||
        static_cast<double>(saving) < kMinStaleShare * static_cast<double>(pk->bytes))
      continue;
    size_t freed_before_backward = 0;
    for (const Forward& f : forwards) freed_before_backward += f.freed_in_forward ? 1 : 0;
    Finding f;
    f.id = "stale-grads";
    f.device = dev.name;
    f.bytes = saving;
    f.title = "the last step's gradients (" + format_bytes(worst->stale_bytes) +
              ") are still live in the next step's forward: the peak would be " +
              format_bytes(without) + " without them";
    if (worst_seq) {
      std::vector<store::AllocationRow> at = trace.reader().allocations_where(
          "WHERE device = ?1 AND seq = ?2", {dev.id, static_cast<int64_t>(*worst_seq)});
      if (!at.empty()) set_site(trace, at.front().stack_id, f);
    }
    f.evidence = {
        {"phase", "forward of a training step, before its backward"},
        {"peak allocated", bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
        {"gradients from earlier steps live in a forward",
         bytes_text(worst->stale_bytes) + " in " + std::to_string(worst->stale.size()) +
             " allocations (step " + std::to_string(worst->step) + ", at " +
             trace.time_text(worst_ts) + ")"},
        {"steps whose forward had them",
         std::to_string(forwards.size()) + " of " + std::to_string(steps.size())},
        {"freed before the step's backward",
         freed_before_backward == forwards.size() ? "yes: zeroed after the forward"
         : freed_before_backward == 0 ? "no: zeroed in place (set_to_none=False) or never zeroed"
                                      : std::to_string(freed_before_backward) + " of " +
                                            std::to_string(forwards.size()) + " steps"},
        {"peak without them", bytes_text(without)}};
    note_inferred(trace, f);
    f.fix = freed_before_backward == forwards.size()
                ? "Call optimizer.zero_grad() before the forward, not after it (tl: "
                  "optimizer.zero_grad() before model(x)): the gradients are then freed before "
                  "the forward saves its activations, and backward makes them again."
                : "Call optimizer.zero_grad() (set_to_none=True, the default) at the start of "
                  "each step, before the forward: zeroing in place (set_to_none=False) keeps "
                  "every gradient allocated, and never zeroing accumulates them across steps.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::analysis::detail
