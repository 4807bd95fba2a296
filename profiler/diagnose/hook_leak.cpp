// hook-leak (profiler/diagnose/diagnose.h): module outputs kept by forward hooks.
// docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// At least this many blocks held at once: a hook that keeps a feature map for a loss holds a
// few per step; one that is never removed, or appends without clearing, holds one per call.
constexpr size_t kMinHookedBlocks = 32;
constexpr double kMinHookedShare = 0.05;  // of the memory allocated then

// The line of PyTorch's Module._call_impl a frame was at (-1: not such a frame).
int call_impl_line(const store::ResolvedFrame& r) {
  std::string file = r.file;
  std::replace(file.begin(), file.end(), '\\', '/');
  return r.function == "_call_impl" && file.ends_with("torch/nn/modules/module.py") ? r.line : -1;
}

}  // namespace

// Note [Hook leak]: Module._call_impl calls a module's forward on one of two lines: a fast path
// when no hook of any kind is registered, and the full path that runs the forward hooks after
// the forward (PyTorch 2.x: the fast path comes first in the file). So in a snapshot whose
// frames pass through _call_impl on two lines, a block whose innermost module call is on the
// later line was made by a module that has hooks; and what a forward returns is exactly what
// its forward hooks are handed. When at least kMinHookedBlocks such blocks, worth at least
// kMinHookedShare of what was allocated, are live at the end of the trace -- or in a snapshot
// of one moment (Note [State-only snapshots]), whose blocks still carry their frames -- hooks
// are keeping what they saw: a hook registered again on every call and never removed, or one
// that appends to a list nobody clears (and, when grad mode was on, with each output the graph
// behind it). Traces without PyTorch's frames (tensorlib's, which has no hooks) never show it.
void detect_hook_leak(const Trace& trace, Diagnosis& out) {
  for (const DeviceRef& dev : trace.devices()) {
    std::vector<store::AllocationRow> live = live_allocations(trace, dev.id, {trace.end_ns(), {}});
    if (live.empty()) continue;
    // The lines of _call_impl seen, and each live block's innermost one.
    std::map<uint64_t, int> innermost;  // stack -> its innermost _call_impl line (-1: none)
    std::set<int> lines;
    for (const store::AllocationRow& r : live) {
      auto [it, fresh] = innermost.try_emplace(r.stack_id, -1);
      if (!fresh || !r.stack_id) continue;
      for (const store::ResolvedFrame& frame : trace.resolved_frames(r.stack_id))
        if (const int l = call_impl_line(frame); l >= 0) {
          if (it->second < 0) it->second = l;
          lines.insert(l);
        }
    }
    if (lines.size() < 2) continue;
    const int hooked_line = *lines.rbegin();
    int64_t total = 0, hooked = 0;
    std::vector<const store::AllocationRow*> held;
    for (const store::AllocationRow& r : live) {
      total += static_cast<int64_t>(r.size);
      if (innermost[r.stack_id] == hooked_line)
        hooked += static_cast<int64_t>(r.size), held.push_back(&r);
    }
    if (held.size() < kMinHookedBlocks ||
        static_cast<double>(hooked) < kMinHookedShare * static_cast<double>(total))
      continue;
    const std::vector<Group> sites = [&] {
      std::vector<store::AllocationRow> rows;
      for (const store::AllocationRow* r : held) rows.push_back(*r);
      return group_allocations(trace, rows, GroupBy::site, 3);
    }();
    uint64_t site_stack = held.front()->stack_id;
    for (const store::AllocationRow* r : held)
      if (!sites.empty() && trace.site(r->stack_id).key == sites.front().key) {
        site_stack = r->stack_id;
        break;
      }
    const bool moment = state_only(trace, dev.id);
    Finding f;
    f.id = "hook-leak";
    f.device = dev.name;
    f.bytes = hooked;
    f.title = std::to_string(held.size()) + " outputs of modules with forward hooks (" +
              format_bytes(hooked) + ") are still alive " +
              (moment ? "in the snapshot" : "at the end") +
              ": hooks are keeping what they were handed";
    set_site(trace, site_stack, f);
    f.evidence = {
        {"held by hooked modules' outputs",
         bytes_text(hooked) + " in " + std::to_string(held.size()) + " blocks"},
        {moment ? "allocated in the snapshot" : "allocated at the end", bytes_text(total)}};
    for (const Group& g : sites)
      f.evidence.push_back({"made under " + g.label,
                            bytes_text(g.bytes) + " in " + std::to_string(g.count) + " blocks"});
    f.fix =
        "Keep the handle register_forward_hook returns and call handle.remove() when the hook is "
        "no longer "
        "needed (not registering it again on every call); clear what the hook collects after each "
        "use; "
        "store output.detach() (and .cpu() if it is read later) so no graph is kept with it.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
