// sync-in-loop (profiler/diagnose/diagnose.h): the same site forcing a host-device sync in
// every step. docs/diagnoses.md gives its evidence and thresholds.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// Thresholds (docs/diagnoses.md says why).
constexpr size_t kMinCompleteSteps = 5;  // a loop, not a few calls
constexpr double kSyncStepShare = 0.9;   // ... "nearly every" complete step

}  // namespace

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
    set_site(trace, p.stack, f);
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

}  // namespace tidemark::diagnose::detail
