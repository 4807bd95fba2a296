// tidemark syncs: the host-device syncs, by site and kind (docs/cli.md).
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

int run_syncs(const SimpleArgs& a) {
  an::Trace t = open_trace(a.file);
  an::SyncReport r = an::syncs(t, a.limit);
  if (a.json) {
    print_json(r);
    return kExitOk;
  }
  if (r.count == 0) {
    fmt::print("{}: no syncs: the host never waited on the device\n", a.file);
    return kExitOk;
  }
  fmt::print("{}: {} syncs, {} waiting", a.file, r.count, an::format_duration(r.total_ns));
  if (r.max_step) fmt::print("; at most {} in a step (step {})", r.max_per_step, *r.max_step);
  fmt::print("\n  by kind:");
  for (const auto& [k, n] : r.by_kind) fmt::print(" {} {}", k, n);
  fmt::print("\n  {:>7} {:>12} {:>12}  {:<14} site\n", "count", "total", "max", "kind");
  for (const an::SyncSite& s : r.sites)
    fmt::print("  {:>7} {:>12} {:>12}  {:<14} {}\n", s.count, an::format_duration(s.total_ns),
               an::format_duration(s.max_ns), s.kind, s.label);
  if (r.sites_total > r.sites.size())
    fmt::print("  ... and {} more sites\n", r.sites_total - r.sites.size());
  return kExitOk;
}

}  // namespace tidemark::cli
