// tidemark diff: two traces compared, device by device (docs/cli.md); --folded writes
// differential folded stacks.
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

// Differential folded stacks (flamegraph.pl's difffolded.pl format: `stack A B`): the stacks
// live at each trace's allocated peak, per device matched by name; with several devices each
// stack starts with its device.
void print_folded_diff(const an::Trace& ta, const an::Trace& tb) {
  std::map<std::string, std::pair<int64_t, int64_t>> lines;
  const std::vector<an::DeviceMatch> devices = an::match_devices(ta, tb);
  for (const an::DeviceMatch& m : devices) {
    const std::string root = devices.size() > 1 ? m.name + ";" : std::string();
    for (const an::Trace* t : {&ta, &tb}) {
      const an::DeviceRef* d = t == &ta ? m.a : m.b;
      auto at = d ? an::peak_point(*t, d->id) : std::nullopt;
      if (!at) continue;
      for (const an::Group& g : an::live_at(*t, d->id, *at, an::GroupBy::stack, 0).groups) {
        auto& [a, b] = lines[root + folded_stack(*t, g)];
        (t == &ta ? a : b) += g.bytes;
      }
    }
  }
  for (const auto& [stack, ab] : lines) fmt::print("{} {} {}\n", stack, ab.first, ab.second);
}

}  // namespace

int run_diff(const DiffArgs& a) {
  an::Trace ta = open_trace(a.a);
  an::Trace tb = open_trace(a.b);
  if (!a.source.empty() && a.by != "line")
    throw UsageError("--file " + a.source + ": is for --by line");
  ta.set_source_file(a.source);
  tb.set_source_file(a.source);
  if (a.folded) {
    print_folded_diff(ta, tb);
    return kExitOk;
  }
  an::TraceDiff d = an::diff(ta, tb, a.by == "line" ? an::GroupBy::line : an::GroupBy::site);
  if (a.limit)
    for (auto* sites : {&d.sites, &d.reserved_sites, &d.categories})
      for (auto& s : *sites)
        for (auto* v : {&s.changed, &s.added, &s.vanished})
          if (v->size() > a.limit) v->resize(a.limit);
  if (a.json) {
    print_json(d);
    return kExitOk;
  }
  auto signed_bytes = [](int64_t v) { return (v > 0 ? "+" : "") + an::format_bytes(v); };
  fmt::print("A {}\nB {}\n", a.a, a.b);
  for (const an::DeviceDiff& x : d.devices) {
    int64_t pa = x.a ? x.a->peak_allocated_bytes : 0, pb = x.b ? x.b->peak_allocated_bytes : 0;
    int64_t ra = x.a ? x.a->peak_reserved_bytes : 0, rb = x.b ? x.b->peak_reserved_bytes : 0;
    fmt::print("\n{}{}\n", x.device, !x.a ? " (only in B)" : !x.b ? " (only in A)" : "");
    fmt::print(
        "  peak allocated {:>12} -> {:>12}  {} ({})\n", an::format_bytes(pa), an::format_bytes(pb),
        signed_bytes(x.peak_allocated_delta),
        pa ? fmt::format("{:+.1f}%", 100.0 * static_cast<double>(pb - pa) / static_cast<double>(pa))
           : std::string("-"));
    fmt::print("  peak reserved  {:>12} -> {:>12}  {}\n", an::format_bytes(ra),
               an::format_bytes(rb), signed_bytes(x.peak_reserved_delta));
    fmt::print("  final allocated delta {}\n", signed_bytes(x.final_allocated_delta));
  }
  auto print_sites = [&](const std::vector<an::TraceDiff::Sites>& sites, const char* what,
                         const char* where) {
    for (const auto& s : sites) {
      auto list = [&](const char* title, const std::vector<an::SiteDiff>& v) {
        if (v.empty()) return;
        fmt::print("\n{} {} {} on {}:\n", title, what, where, s.device);
        for (const an::SiteDiff& x : v)
          fmt::print("  {:>12} {:>12} -> {:>12}  {}\n", signed_bytes(x.delta()),
                     an::format_bytes(x.a_bytes), an::format_bytes(x.b_bytes), x.label);
      };
      list("changed", s.changed);
      list("new", s.added);
      list("vanished", s.vanished);
    }
  };
  print_sites(d.categories, "categories", "at the allocated peak");
  print_sites(d.sites, a.by == "line" ? "lines" : "sites", "at the allocated peak");
  print_sites(d.reserved_sites, "sites", "of reserved memory at the reserved peak");
  return kExitOk;
}

}  // namespace tidemark::cli
