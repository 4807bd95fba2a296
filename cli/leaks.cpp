// tidemark leaks: what was still allocated at the end, grouped, and by the step that made it
// (docs/cli.md).
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

int run_leaks(const LeaksArgs& a) {
  an::Trace t = open_trace(a.file);
  auto dev = device_id(t, a.device);
  if (a.folded) {
    print_folded(t, an::leaks(t, dev, an::GroupBy::stack, 0).groups);
    return kExitOk;
  }
  an::LeakReport r = an::leaks(t, dev, group_by(a.by), a.limit);
  std::vector<std::pair<std::string, an::Growth>> growth;
  if (a.by_step)
    for (const an::DeviceRef& d : select_devices(t, a.device))
      growth.emplace_back(d.name, an::growth(t, d.id));
  if (a.json) {
    json j = r;
    if (a.by_step) {
      json g = json::object();
      for (const auto& [name, gr] : growth) g[name] = gr;
      j["growth"] = g;
    }
    print_json(j);
    return kExitOk;
  }
  if (t.imported_snapshot()) {  // the program was still running when the snapshot was taken
    fmt::print("{}: live at the end of the snapshot: {} in {} allocations, by {}:\n", a.file,
               an::format_bytes(r.bytes), r.count, a.by);
    print_groups(r.groups, r.bytes, r.groups_total);
  } else if (r.count == 0) {
    fmt::print("{}: no leaks: everything allocated was freed by the end\n", a.file);
  } else {
    fmt::print("{}: {} in {} allocations still allocated at the end, by {}:\n", a.file,
               an::format_bytes(r.bytes), r.count, a.by);
    print_groups(r.groups, r.bytes, r.groups_total);
  }
  if (a.by_step) {
    if (!r.by_step.empty()) fmt::print("\nleaked allocations by the step that made them:\n");
    for (const an::StepLeak& l : r.by_step)
      fmt::print("  {:>10} {:>12} {:>7}\n", l.step ? fmt::format("step {}", *l.step) : "before",
                 an::format_bytes(l.bytes), l.count);
    for (const auto& [name, g] : growth) {
      fmt::print("\nlive bytes at each step boundary on {}:\n", name);
      for (const auto& [step, bytes] : g.boundaries)
        fmt::print("  step {:>6} {:>12}\n", step, an::format_bytes(bytes));
      if (g.growing)
        fmt::print("  GROWING: about {} per step (linear fit, r2 {:.2f})\n",
                   an::format_bytes(static_cast<int64_t>(g.slope_bytes_per_step)), g.r2);
      else
        fmt::print("  no steady growth across steps\n");
    }
  }
  return kExitOk;
}

}  // namespace tidemark::cli
