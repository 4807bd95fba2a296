// allocator-settings (profiler/diagnose/diagnose.h, docs/diagnoses.md): a
// PYTORCH_CUDA_ALLOC_CONF that would have lowered the reserved peak, or avoided an OOM, measured
// by replaying the trace under the sweep's settings (profiler/replay/replay.h) -- never guessed.
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/replay/replay.h"

namespace tidemark::diagnose::detail {

using replay::Figures;
using replay::Plan;
using replay::Result;
using replay::Settings;
using replay::Start;

namespace {

// Note [Allocator-settings finding]
// A setting is reported when its replay saves at least a quarter of the reserved peak the
// replay under the recorded settings reaches, or at least 1 GiB, or serves every request where
// the recorded settings ran out of memory. Both sides are replays, so what the importer could
// only estimate (sizes of blocks freed before a snapshot ends) weighs the same on each. Ties
// go to the setting listed first in the sweep: the fewest keys changed.
constexpr double kShare = 0.25;
constexpr uint64_t kBytes = uint64_t{1} << 30;

// Note [Allocator-settings budget]
// diagnose runs every detector, in the GUI too, so this one keeps to a budget of replayed
// requests: the whole sweep (24 settings) when requests x settings fit in kBudget -- a few
// seconds of replay (about 2 s of one core at 5 M requests/s; expandable segments replay
// slower) -- else the two settings users try first, expandable_segments:True and
// max_split_size_mb:256 (a 196 MB snapshot's sweep took 17 s, a 1 GB one's minutes, in the
// GUI's findings too). The finding then says how many were replayed and that `tidemark replay
// --sweep` tries them all.
constexpr uint64_t kBudget = 10'000'000;

std::vector<Settings> grid_for(uint64_t requests, const std::vector<Settings>& full) {
  if (requests * full.size() <= kBudget) return full;
  std::vector<Settings> out;
  for (const Settings& s : full)
    if (s.label == "expandable_segments:True" || s.label == "max_split_size_mb:256")
      out.push_back(s);
  return out;
}

}  // namespace

void detect_allocator_settings(const Trace& trace, Diagnosis& out) {
  std::vector<Plan> plans;
  try {
    plans = replay::build_plans(trace);
  } catch (const replay::SettingsError& e) {
    out.skipped.push_back({"allocator-settings", e.what()});
    return;
  }
  const std::vector<Settings> full = replay::default_sweep();
  for (const Plan& p : plans) {
    // One start for every side (Note [Rederived start]): the recorded settings' replay from the
    // state rederived as the others' is, so the comparison is the settings' alone.
    std::vector<Settings> grid = grid_for(p.requests.size(), full);
    for (Settings& s : grid) s.start = Start::rederived;
    Settings baseline;
    baseline.conf = p.recorded;
    baseline.start = Start::rederived;
    const Result base = replay::run(p, baseline);
    const std::vector<Result> results = replay::sweep(p, grid);
    size_t best = grid.size();
    for (size_t i = 0; i < grid.size(); ++i) {
      const Figures& f = results[i].figures;
      if (f.failed_requests > 0) continue;
      if (best == grid.size() || f.peak_reserved < results[best].figures.peak_reserved) best = i;
    }
    if (best == grid.size()) continue;
    const Figures& b = results[best].figures;
    const Figures& r = base.figures;
    const bool averts_oom = r.failed_requests > 0;
    const uint64_t saved =
        r.peak_reserved > b.peak_reserved ? r.peak_reserved - b.peak_reserved : 0;
    if (!averts_oom &&
        (saved == 0 || (saved < kBytes && static_cast<double>(saved) <
                                              kShare * static_cast<double>(r.peak_reserved))))
      continue;
    Finding f;
    f.id = "allocator-settings";
    f.device = p.device.name;
    f.bytes = static_cast<int64_t>(saved);
    // Averting an out-of-memory error is major whatever the bytes (Note [Severity]).
    if (averts_oom) f.severity = Severity::major;
    const std::string& conf = grid[best].label;
    if (averts_oom)
      f.title = "PYTORCH_CUDA_ALLOC_CONF=" + conf +
                " serves every request where the recorded settings ran out of memory";
    else
      f.title = "PYTORCH_CUDA_ALLOC_CONF=" + conf + " lowers the reserved peak by " +
                format_bytes(f.bytes) + " (replayed)";
    const std::string recorded = p.recorded.text().empty() ? "(defaults)" : p.recorded.text();
    f.evidence = {
        {"recorded settings", recorded},
        {"reserved peak, recorded settings (replayed)",
         bytes_text(static_cast<int64_t>(r.peak_reserved))},
        {"reserved peak, " + conf + " (replayed)",
         bytes_text(static_cast<int64_t>(b.peak_reserved))},
        {"device allocations (recorded settings, " + conf + ")",
         std::to_string(r.device_allocations) + ", " + std::to_string(b.device_allocations)},
        {"reserved but unallocated at the peak (recorded settings, " + conf + ")",
         format_bytes(static_cast<int64_t>(r.unallocated_at_peak)) + ", " +
             format_bytes(static_cast<int64_t>(b.unallocated_at_peak))},
        {"failed allocations (recorded settings, " + conf + ")",
         std::to_string(r.failed_requests) + ", " + std::to_string(b.failed_requests)},
        {"settings replayed",
         std::to_string(grid.size()) +
             (grid.size() < full.size()
                  ? " (of " + std::to_string(full.size()) + ": the trace has " +
                        std::to_string(p.requests.size()) +
                        " requests; `tidemark replay --sweep` replays them all)"
                  : "")},
    };
    f.fix = "Set PYTORCH_CUDA_ALLOC_CONF=" + conf +
            " (TL_ALLOC_CONF for tensorlib) before the program starts; "
            "`tidemark replay " +
            trace.shown_path() + " --alloc-conf " + conf + "` shows the replay in full.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
