// tidemark steps: each step's duration, memory and syncs (docs/cli.md).
#include <fmt/core.h>

#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/tables.h"
#include "profiler/analysis/flame.h"
#include "profiler/analysis/json.h"
#include "profiler/naming/units.h"
#include "profiler/record/recorder.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::cli {

namespace an = analysis;
using nlohmann::json;

int run_steps(const SimpleArgs& a) {
  an::Trace t = open_trace(a.file);
  an::DeviceRef d = primary_device(t, a.device);
  std::vector<an::StepStats> steps = an::step_stats(t, d.id);
  an::Growth g = an::fit_growth([&] {
    std::vector<std::pair<int64_t, int64_t>> b;
    for (const auto& s : steps) b.emplace_back(s.number, s.allocated_at_start_bytes);
    return b;
  }());
  const std::optional<std::string> inferred = an::steps_inferred_from(t);
  if (a.json) {
    print_json(json{{"device", d.name},
                    {"steps", steps},
                    {"growth", g},
                    {"inferred_from", inferred ? json(*inferred) : json(nullptr)}});
    return kExitOk;
  }
  if (steps.empty()) {
    fmt::print("{}: no steps recorded (call tl::profiler::step() once per iteration)\n", a.file);
    return kExitOk;
  }
  fmt::print("{}: {} steps on {}{}\n", a.file, steps.size(), d.name,
             !inferred ? std::string()
             // Note [Inferred categories] names frame steps "inferred from optimizer frames" and
             // repetition's "inferred from repeated allocations".
             : inferred->ends_with("frames") || inferred->ends_with("allocations")
                 ? " (inferred from the " + *inferred + ")"
                 : " (inferred from the " + *inferred + " annotations)");
  fmt::print("  {:>6} {:>10} {:>12} {:>12} {:>12} {:>8} {:>6}\n", "step", "start", "duration",
             "live at start", "peak alloc", "allocs", "syncs");
  for (const an::StepStats& s : steps)
    fmt::print("  {:>6} {:>9.3f}s {:>12} {:>12} {:>12} {:>8} {:>6}\n", s.number,
               static_cast<double>(s.start_ns) / 1e9, an::format_duration(s.duration_ns),
               an::format_bytes(s.allocated_at_start_bytes),
               an::format_bytes(s.peak_allocated_bytes), s.alloc_count, s.sync_count);
  if (g.growing)
    fmt::print("live bytes grow by about {} per step (r2 {:.2f})\n",
               an::format_bytes(static_cast<int64_t>(g.slope_bytes_per_step)), g.r2);
  return kExitOk;
}

}  // namespace tidemark::cli
