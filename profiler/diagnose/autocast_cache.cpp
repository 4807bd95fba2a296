// autocast-cache (profiler/diagnose/diagnose.h): autocast's 16-bit copies of float32 weights,
// cached for the autocast region and saved for backward, set part of the peak (Note [Autocast
// weight copies] in support.cpp). docs/diagnoses.md gives its evidence and thresholds.
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// What makes it a finding: the copies live at the peak are at least this share of it (the
// share of a moderate finding, Note [Severity]).
constexpr double kMinAutocastShare = kModerateMemoryShare;

}  // namespace

// The finding: at the device's allocated peak, the weight copies live (Note [Autocast weight
// copies]) are at least kMinAutocastShare of it. It reports them, the parameters they copy, the
// activations' casts beside them, the phase, and the peak without them as the saving: what
// 16-bit weights (no copy to make) or, for inference, an uncached cast would leave. A peak
// after the region has ended (an optimizer step's, with the copies freed) has none, and no
// finding. A snapshot of one moment is read at that moment (Note [State-only snapshots]: no
// peak over time, but what holds memory then).
//
// Note [A region around the loop]: the cache lives as long as the outermost autocast region.
// Opened around the forward and the loss, as PyTorch's recipe has it, the region ends each step
// and every forward casts the weights anew; opened around the whole loop (or the optimizer
// step with it), the region never ends, the first forward's copies serve every later one, and
// the optimizer's in-place updates of the float32 weights never reach them: the model computes
// with its first step's weights -- a correctness bug before a memory one. It shows as weight
// copies live at the peak that were made before the step holding it (a step starts after the
// previous step's optimizer); such a finding is reported whatever its bytes, as major. It needs
// the steps and the copies' own allocations in the trace: a snapshot whose history began after
// the first forward has those copies among its frameless blocks, which it cannot tell.
void detect_autocast_cache(const Trace& trace, Diagnosis& out) {
  const WindowPhases phases = window_phases(trace);
  for (const DeviceRef& dev : trace.devices()) {
    const std::optional<TimePoint> at = peak_point(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    const std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, *at);
    const AutocastCopies copies = autocast_weight_copies(trace, live);
    if (copies.seqs.empty()) continue;
    // Note [A region around the loop]: the copies made before the step holding the peak.
    int64_t held = 0;
    size_t held_count = 0;
    if (const std::optional<StepSpan> step = step_holding(trace, dev.id, pk->ts_ns))
      for (const store::AllocationRow& r : live)
        if (copies.seqs.count(r.seq) && r.alloc_ts < step->ts)
          held += static_cast<int64_t>(r.size), ++held_count;
    if (held == 0 &&
        static_cast<double>(copies.bytes) < kMinAutocastShare * static_cast<double>(pk->bytes))
      continue;
    int64_t parameters = 0;
    for (const store::AllocationRow& r : live)
      if (r.category == events::Category::parameter) parameters += static_cast<int64_t>(r.size);
    const bool one_moment = state_only(trace, dev.id);
    const bool backward = phases.known && phases.backward;
    const std::string phase = phase_label(phases);
    const std::string when = one_moment ? "when the snapshot was taken" : "at the peak";
    Finding f;
    f.id = "autocast-cache";
    f.device = dev.name;
    f.bytes = copies.bytes;
    f.title = "autocast holds a 16-bit copy of " + std::to_string(copies.seqs.size()) +
              " float32 weights: " + format_bytes(copies.bytes) + " " + when + " of " +
              format_bytes(pk->bytes) + ", beside the weights themselves";
    set_site(trace, copies.largest_stack, f);
    f.evidence = {
        {one_moment ? "allocated when the snapshot was taken" : "peak allocated",
         bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
        {"weight copies made by autocast, live " + when,
         bytes_text(copies.bytes) + " in " + std::to_string(copies.seqs.size()) + " allocations"},
        {"parameters live " + when, bytes_text(parameters)},
        {"autocast's casts of activations beside them", bytes_text(copies.activation_bytes)}};
    if (!one_moment)
      f.evidence.push_back({"peak without the copies", bytes_text(pk->bytes - copies.bytes)});
    if (!phase.empty()) f.evidence.insert(f.evidence.begin(), {"phase", phase});
    note_inferred(trace, f);
    if (held > 0) {
      f.title = "autocast's region spans the training loop: " + std::to_string(held_count) +
                " 16-bit weight copies made in an earlier step (" + format_bytes(held) +
                ") are reused after the optimizer changed the weights -- later forwards compute "
                "with stale weights";
      f.evidence.emplace_back(
          "copies made before the peak's step, still used in it",
          bytes_text(held) + " in " + std::to_string(held_count) + " allocations");
      f.fix =
          "Open torch.autocast around the forward and the loss only, not around the loop or the "
          "optimizer step (PyTorch's automatic mixed precision recipe): its cache of weight "
          "copies is cleared when the region exits, so each step casts the weights the "
          "optimizer updated. Under one region the model trains on its first step's weights.";
      f.severity = Severity::major;  // wrong results, whatever the bytes
      out.findings.push_back(std::move(f));
      continue;
    }
    f.fix = backward
                ? "With float32 weights, autocast makes a bfloat16/float16 copy of each for the "
                  "region and the graph saves it for backward. Where memory binds, keep the "
                  "weights themselves in 16 bits with a float32 master copy in the optimizer "
                  "(FSDP's MixedPrecision, or a bf16 model with an fp32 optimizer state), so no "
                  "second copy is made."
                : "For inference the float32 weights are not needed: cast the model once "
                  "(model.to(torch.bfloat16)) and run it without autocast, or run under "
                  "torch.inference_mode() with torch.autocast(..., cache_enabled=False) so each "
                  "copy is freed after its op (no_grad alone keeps the cache for the region).";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
