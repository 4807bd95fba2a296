// autocast-cache (profiler/analysis/diagnose.h): autocast's 16-bit copies of float32 weights,
// cached for the autocast region and saved for backward, set part of the peak.
// docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/diagnose_allocator_support.h"
#include "profiler/analysis/memory.h"

namespace tidemark::analysis::detail {

namespace {

// What makes it a finding: the copies live at the peak are at least this share of it (the
// share of a moderate finding, Note [Severity]).
constexpr double kMinAutocastShare = kModerateMemoryShare;

// The allocator rounds every block to 512 bytes (docs/allocator.md).
constexpr uint64_t kBlockRound = 512;
uint64_t rounded(uint64_t bytes) {
  return (bytes + kBlockRound - 1) / kBlockRound * kBlockRound;
}
// The bytes a block was asked for: its request where the trace has one, else its size.
uint64_t asked(const store::AllocationRow& r) {
  return r.requested_size ? r.requested_size : r.size;
}

// Whether a stack is autocast's cast of an input: a frame of `at::autocast::cached_cast`,
// which makes the 16-bit copy (through `_to_copy`) and caches it when the input is a weight.
bool autocast_cast(const Trace& t, uint64_t stack) {
  for (const store::ResolvedFrame& r : t.resolved_frames(stack))
    if (std::string_view(r.function).starts_with("at::autocast::cached_cast")) return true;
  return false;
}

}  // namespace

// Note [Autocast weight copies]: torch.autocast runs the ops of its lower-precision list
// (matmul, linear, einsum, convolutions, ...) in float16 or bfloat16, casting their float32
// inputs first in `at::autocast::cached_cast`. A weight -- a leaf that requires grad -- is cast
// once per autocast region and the copy cached until the region exits (`cache_enabled`, the
// default), under no_grad too; in training the graph saves the copy for backward as well. With
// float32 weights every cast weight therefore has a second, half-sized copy while the region
// lasts, which a float32 run does not hold. Which casts are weights' is read from sizes, as the
// frames of a cast are the same for a weight and an activation: among the allocations live at
// one moment, a cast whose size is half a live parameter's (its request, rounded as the
// allocator rounds) is that parameter's copy, at most as many copies of a size as there are
// parameters of twice it; the other casts are activations'. It needs native frames (PyTorch's
// `_record_memory_history(stacks="all")`, the default) and parameters told apart (recorded, or
// inferred for a snapshot: Note [Inferred categories] in profiler/importers/infer.cpp).
AutocastCopies autocast_weight_copies(const Trace& trace,
                                      const std::vector<store::AllocationRow>& live) {
  AutocastCopies out;
  std::map<uint64_t, uint64_t> parameters;  // a copy's rounded size -> parameters it may copy
  for (const store::AllocationRow& r : live)
    if (r.category == events::Category::parameter) ++parameters[rounded(asked(r) / 2)];
  if (parameters.empty()) return out;
  std::map<uint64_t, bool> memo;
  uint64_t largest = 0;
  for (const store::AllocationRow& r : live) {
    if (!r.stack_id || r.category == events::Category::parameter) continue;
    auto [it, fresh] = memo.try_emplace(r.stack_id, false);
    if (fresh) it->second = autocast_cast(trace, r.stack_id);
    if (!it->second) continue;
    auto p = parameters.find(rounded(asked(r)));
    if (p == parameters.end() || p->second == 0) {
      out.activation_bytes += static_cast<int64_t>(r.size);
      continue;
    }
    --p->second;
    out.bytes += static_cast<int64_t>(r.size);
    out.seqs.insert(r.seq);
    if (r.size > largest) largest = r.size, out.largest_stack = r.stack_id;
  }
  return out;
}

// The finding: at the device's allocated peak, the weight copies live (Note [Autocast weight
// copies]) are at least kMinAutocastShare of it. It reports them, the parameters they copy, the
// activations' casts beside them, the phase, and the peak without them as the saving: what
// 16-bit weights (no copy to make) or, for inference, an uncached cast would leave. A peak
// after the region has ended (an optimizer step's, with the copies freed) has none, and no
// finding. A snapshot of one moment is read at that moment (Note [State-only snapshots]: no
// peak over time, but what holds memory then).
void detect_autocast_cache(const Trace& trace, Diagnosis& out) {
  const WindowPhases phases = window_phases(trace);
  for (const DeviceRef& dev : trace.devices()) {
    const std::optional<TimePoint> at = peak_point(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    const std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, *at);
    const AutocastCopies copies = autocast_weight_copies(trace, live);
    if (copies.seqs.empty() ||
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

}  // namespace tidemark::analysis::detail
