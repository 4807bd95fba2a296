// optimizer-peak (profiler/diagnose/diagnose.h): the optimizer step's own temporaries set the
// device's peak. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/allocator_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// The saving that makes it a finding: the peak would fall by at least this share.
constexpr double kMinOptimizerSaving = 0.10;

// Whether a stack is an optimizer's step: a frame of torch/optim (Windows' '\' read as '/'),
// of tensorlib's optim, or a `step` of a file whose name says it is an optimizer (a
// hand-written AdamW in `optimizer.py`). `torch`: the innermost of those frames is
// torch.optim's own. `multi_tensor`: the step is a foreach implementation (torch's
// `_multi_tensor_...`, tensorlib's Adam::multi_tensor_step), which allocates one temporary per
// parameter at once.
struct OptimizerFrames {
  bool optimizer = false, multi_tensor = false, torch = false;
  std::string where;  // the innermost optimizer frame, "function (file:line)"
};
OptimizerFrames optimizer_frames(const Trace& t, uint64_t stack) {
  OptimizerFrames o;
  for (const store::ResolvedFrame& r : t.resolved_frames(stack)) {
    std::string file = r.file;
    std::replace(file.begin(), file.end(), '\\', '/');
    const std::string base =
        file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
    const bool was = o.optimizer;
    const bool torch = file.find("torch/optim/") != std::string::npos;
    if (torch || r.function.find("tl::optim::") != std::string::npos ||
        (r.function == "step" && base.find("optim") != std::string::npos))
      o.optimizer = true;
    if (o.optimizer && !was) {  // the innermost optimizer frame
      // torch.optim's own step only when it is innermost: a hand-written optimizer's step is
      // called through torch.optim.Optimizer's wrapper too.
      o.torch = torch;
      o.where = std::string(qualified_name(r.function)) + " (" + base + ":" +
                std::to_string(r.line) + ")";
    }
    if (r.function.starts_with("_multi_tensor_") ||
        r.function.find("tl::optim::Adam::multi_tensor_step") != std::string::npos)
      o.multi_tensor = true;
  }
  return o;
}

}  // namespace

// Note [Optimizer peak]: an optimizer step runs after backward, with the parameters, their
// gradients and the optimizer's state all live; whatever the step allocates for itself comes
// on top of all three. torch.optim's default multi-tensor (foreach) AdamW allocates a
// parameter-sized temporary for every parameter at once; a hand-written one that updates out
// of place (`m = beta1 * m + ...`) a few per parameter. The finding: at the device's
// allocated peak, the live temporaries allocated by an optimizer's step (frames of
// torch/optim, tl::optim, or a `step` in an optimizer's file; not its state, which persists)
// are at least kMinOptimizerSaving of the peak. The peak without them is the highest value of
// the allocated curve with every optimizer temporary of the window taken out (each step's: a
// loop of steps peaks in each of them); the difference is the saving and the bytes at stake,
// and the highest allocated while no temporary is live is the forward and backward maximum. A
// snapshot of one moment has no step to look at (Note [State-only snapshots]).
void detect_optimizer_peak(const Trace& trace, Diagnosis& out) {
  for (const DeviceRef& dev : trace.devices()) {
    if (state_only(trace, dev.id)) continue;
    const std::optional<TimePoint> at = peak_point(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    std::map<uint64_t, OptimizerFrames> memo;
    // What an optimizer's step allocated for itself (its frames; not its state): the stack's
    // frames, or null.
    auto temporary = [&](const store::AllocationRow& r) -> const OptimizerFrames* {
      if (r.category == events::Category::optimizer_state ||
          r.category == events::Category::parameter || r.category == events::Category::gradient)
        return nullptr;
      auto [it, fresh] = memo.try_emplace(r.stack_id);
      if (fresh && r.stack_id) it->second = optimizer_frames(trace, r.stack_id);
      return it->second.optimizer ? &it->second : nullptr;
    };
    int64_t temporaries = 0;
    uint64_t count = 0, largest_stack = 0, largest = 0;
    bool multi_tensor = false, torch_optim = false;
    for (const store::AllocationRow& r : live_allocations(trace, dev.id, *at)) {
      const OptimizerFrames* o = temporary(r);
      if (!o) continue;
      temporaries += static_cast<int64_t>(r.size);
      ++count;
      multi_tensor = multi_tensor || o->multi_tensor;
      torch_optim = torch_optim || o->torch;
      if (r.size > largest) largest = r.size, largest_stack = r.stack_id;
    }
    if (count == 0 ||
        static_cast<double>(temporaries) < kMinOptimizerSaving * static_cast<double>(pk->bytes))
      continue;
    // The allocated curve with every optimizer temporary of the window taken out (each
    // step's, not only the peak's): its highest value is the peak without them.
    std::vector<std::pair<uint64_t, int64_t>> changes;  // (time, +size at alloc / -size at free)
    using events::Category;
    store::for_each_allocation(  // the rows one at a time: a long run has millions
        trace.reader(),
        {.device = dev.id,
         .not_categories = {Category::optimizer_state, Category::parameter, Category::gradient},
         .with_stack = true},
        store::AllocationOrder::none, [&](const store::AllocationSpan& a) {
          auto [it, fresh] = memo.try_emplace(a.stack_id);
          if (fresh) it->second = optimizer_frames(trace, a.stack_id);
          if (!it->second.optimizer) return;
          const auto size = static_cast<int64_t>(a.size);
          changes.emplace_back(a.alloc_ts, size);
          if (a.free_requested_ts) changes.emplace_back(*a.free_requested_ts, -size);
        });
    std::sort(changes.begin(), changes.end());
    int64_t without = 0, live = 0, outside = 0;
    size_t next = 0;
    trace.reader().for_each_lod(
        dev.id, 0, 0, std::numeric_limits<int64_t>::max(), [&](const store::LodRow& row) {
          for (; next < changes.size() && changes[next].first <= row.t; ++next)
            live += changes[next].second;
          without = std::max(without, row.allocated - live);
          if (live == 0) outside = std::max(outside, row.allocated);
          return true;
        });
    const int64_t saving = pk->bytes - without;
    if (static_cast<double>(saving) < kMinOptimizerSaving * static_cast<double>(pk->bytes))
      continue;
    Finding f;
    f.id = "optimizer-peak";
    f.device = dev.name;
    f.bytes = saving;
    f.title = "the optimizer step sets the peak: its temporaries add " + format_bytes(temporaries) +
              " to the " + format_bytes(pk->bytes - temporaries) +
              " already live (parameters, gradients, state)";
    set_site(trace, largest_stack, f);
    f.evidence = {
        {"phase", "optimizer step (after backward: parameters, gradients and state all live)"},
        {"peak allocated", bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
        {"optimizer temporaries live at the peak",
         bytes_text(temporaries) + " in " + std::to_string(count) + " allocations"},
        {"highest allocated outside the optimizer's steps (forward and backward)",
         bytes_text(outside)},
        {"peak without the temporaries", bytes_text(without)}};
    if (!memo[largest_stack].where.empty())
      f.evidence.push_back({"allocated in", memo[largest_stack].where});
    note_inferred(trace, f);
    f.fix = multi_tensor  ? "A multi-tensor (foreach) step allocates a temporary for every "
                            "parameter at once: construct the optimizer with fused=True (one "
                            "kernel, no parameter-sized temporaries; tensorlib's default) or "
                            "foreach=False (one parameter at a time)."
            : torch_optim ? "Construct the optimizer with fused=True (or foreach=False) so its "
                            "step does not allocate "
                            "temporaries for all parameters at once."
                          : "Update the state and parameters in place (mul_, add_, addcdiv_ under "
                            "torch.no_grad()) "
                            "instead of building new tensors per parameter, or use "
                            "torch.optim.AdamW(fused=True).";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
