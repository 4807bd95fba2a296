// tidemark top: what was live at a moment, grouped (docs/cli.md); --folded writes it as folded
// stacks.
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

namespace {

// top --reserved: the segments (and mapped ranges) live at the reserved peak of the device
// with the most reserved memory, or --device's, grouped as --by says.
int top_reserved(const an::Trace& t, const TopArgs& a) {
  if (a.at != "peak")
    throw UsageError("--reserved: only at the reserved peak (no --at " + a.at + ")");
  const std::vector<an::DeviceRef> devices =
      a.device.empty() ? t.devices() : select_devices(t, a.device);
  const an::DeviceRef* d = nullptr;
  int64_t most = -1;
  for (const an::DeviceRef& c : devices) {
    auto p = an::peak(t, c.id, store::Curve::reserved);
    if (p && p->bytes > most) d = &c, most = p->bytes;
  }
  std::optional<an::LiveBreakdown> b;
  if (d)
    b = an::reserved_at_peak(t, d->id, a.folded ? 0 : a.limit,
                             a.folded ? an::GroupBy::stack : group_by(a.by));
  if (!b)
    throw UsageError(a.file + ": no reserved memory" + (a.device.empty() ? "" : " on " + a.device));
  if (a.folded) {
    print_folded(t, b->groups);
    return kExitOk;
  }
  if (a.json) {
    print_json(*b);
    return kExitOk;
  }
  fmt::print("{}: reserved on {} at its peak, {}: {} in {} segments, by {}:\n", a.file, b->device,
             an::format_time_point(b->time_ns, t.synthetic_times(), 6), an::format_bytes(b->bytes),
             b->count, a.by);
  print_groups(b->groups, b->bytes, b->groups_total);
  return kExitOk;
}

}  // namespace

int run_top(const TopArgs& a) {
  an::Trace t = open_trace(a.file);
  if (!a.source.empty() && a.by != "line")
    throw UsageError("--file " + a.source + ": is for --by line");
  t.set_source_file(a.source);
  if (a.reserved) return top_reserved(t, a);
  an::DeviceRef d = primary_device(t, a.device);
  an::TimePoint at;
  if (a.at == "peak") {
    auto p = an::peak_point(t, d.id);
    if (!p) throw UsageError(a.file + ": device " + d.name + " has no memory events");
    at = *p;
  } else if (a.at.rfind("step:", 0) == 0) {
    int64_t n = 0;
    try {
      size_t used = 0;
      n = std::stoll(a.at.substr(5), &used);
      if (used != a.at.size() - 5) throw std::invalid_argument("junk");
    } catch (const std::exception&) {
      throw UsageError("--at " + a.at + ": expected step:N with N a step number");
    }
    try {
      at = an::step_point(t, n);
    } catch (const std::invalid_argument& e) {
      throw UsageError(a.file + ": " + e.what());
    }
  } else {
    at.ts = parse_time(t, "--at", a.at);
  }
  if (a.folded) {
    print_folded(t, an::live_at(t, d.id, at, an::GroupBy::stack, 0).groups);
    return kExitOk;
  }
  an::LiveBreakdown b = an::live_at(t, d.id, at, group_by(a.by), a.limit);
  if (a.json) {
    print_json(b);
    return kExitOk;
  }
  fmt::print("{}: live on {} at {}: {} in {} allocations, by {}:\n", a.file, b.device,
             an::format_time_point(b.time_ns, t.synthetic_times(), 6), an::format_bytes(b.bytes),
             b.count, a.by);
  print_groups(b.groups, b.bytes, b.groups_total);
  return kExitOk;
}

}  // namespace tidemark::cli
