// tidemark summary and info: what a trace holds, for people and (--json) for scripts (the
// contract is in docs/cli.md).
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

int run_summary(const SummaryArgs& a) {
  an::Trace t = open_trace(a.file);
  an::SummaryOptions o;
  o.device = device_id(t, a.device);
  o.top_limit = a.limit;
  an::Summary s;
  {
    Progress p("summarising " + a.file);
    s = an::summarize(t, o);
  }
  if (a.json) {
    print_json(s);
    return kExitOk;
  }
  fmt::print("{}: {} events, {}, {} steps{}{}\n", s.path, s.event_count,
             s.synthetic_times ? std::string("no times (the snapshot's entries in order)")
                               : an::format_duration(s.duration_ns),
             s.step_count, s.clean_end ? "" : ", recording did not end cleanly",
             !s.loss_counted
                 ? (s.dropped_count ? fmt::format(", at least {} events DROPPED, more uncounted",
                                                  s.dropped_count)
                                    : std::string(", events DROPPED uncounted"))
             : s.dropped_count ? fmt::format(", {} events DROPPED", s.dropped_count)
                               : "");
  if (!s.command_line.empty()) fmt::print("command: {}\n", s.command_line);
  if (!s.estimated.empty()) fmt::print("{}\n", an::estimate_label(s.estimated));
  for (const an::DeviceSummary& d : s.devices) {
    fmt::print(
        "\n{}{}\n", d.device,
        d.description != d.device && !d.description.empty() ? " (" + d.description + ")" : "");
    fmt::print("  peak allocated {:>12}  at {}{}\n", an::format_bytes(d.peak_allocated_bytes),
               an::format_time_point(d.peak_allocated_time_ns, s.synthetic_times),
               d.peak_allocated_estimated_blocks
                   ? fmt::format(
                         " (estimated: {} of the blocks live then were freed before the end of the "
                         "snapshot, their sizes rounded from the requests)",
                         d.peak_allocated_estimated_blocks)
                   : "");
    if (s.imported_snapshot)
      fmt::print("  peak requested {:>12}  (what memory_viz's Active Memory Timeline draws)\n",
                 an::format_bytes(d.peak_requested_bytes));
    fmt::print("  peak reserved  {:>12}   peak active {}\n",
               an::format_bytes(d.peak_reserved_bytes), an::format_bytes(d.peak_active_bytes));
    fmt::print("  at the end     {:>12} allocated, {} reserved\n",
               an::format_bytes(d.final_allocated_bytes), an::format_bytes(d.final_reserved_bytes));
    fmt::print("  {} allocations, {} segments, {} OOMs, {} syncs\n", d.alloc_count,
               d.segment_alloc_count, d.oom_count, d.sync_count);
    if (!d.private_pools.empty()) {  // Note [Private pools]: part of reserved, at the snapshot
      int64_t total = 0;
      for (const an::PrivatePoolSummary& p : d.private_pools) total += p.reserved_bytes;
      fmt::print(
          "  private pools  {:>12} reserved at the end of the snapshot, in {} pools "
          "(CUDA graphs, MemPool):\n",
          an::format_bytes(total), d.private_pools.size());
      for (const an::PrivatePoolSummary& p : d.private_pools)
        fmt::print("    pool ({}, {}) {:>12} in {} segments\n", p.pool_a, p.pool_b,
                   an::format_bytes(p.reserved_bytes), p.segments);
    }
  }
  if (s.top_at_peak)
    print_breakdown("live at the allocated peak", *s.top_at_peak, "allocations", s.synthetic_times);
  if (s.categories_at_peak) {  // what kind of memory the peak is: one line
    const an::LiveBreakdown& c = *s.categories_at_peak;
    std::string line;
    for (const an::Group& g : c.groups)
      line += fmt::format("{}{} {} ({:.1f}%)", line.empty() ? "" : ", ", g.label,
                          an::format_bytes(g.bytes),
                          100.0 * static_cast<double>(g.bytes) / static_cast<double>(c.bytes));
    fmt::print("  by category: {}\n", line);
    if (const an::CategoryRules* rules = t.category_rules())  // whose names these are
      fmt::print("  (by the rules of {})\n", rules->source());
    else if (!s.categories_inferred.empty())  // Note [Inferred categories]: say they are guesses
      fmt::print("  (inferred, not recorded: from {})\n", s.categories_inferred);
  }
  // Where reserved memory came from: for a CUDA program recorded by injection (segments, no
  // blocks) the only sites there are.
  if (s.reserved_at_peak)
    print_breakdown("reserved at the reserved peak", *s.reserved_at_peak, "segments",
                    s.synthetic_times);
  if (s.imported_snapshot) {  // the program was still running: nothing is known to be leaked
    fmt::print("\nlive at the end of the snapshot: {} in {} allocations, by site:\n",
               an::format_bytes(s.leaks.bytes), s.leaks.count);
    print_groups(s.leaks.groups, s.leaks.bytes, s.leaks.groups_total);
  } else if (s.leaks.count == 0) {
    fmt::print("\nleaks: none (everything allocated was freed)\n");
  } else {
    fmt::print("\nleaks: {} in {} allocations still allocated at the end, by site:\n",
               an::format_bytes(s.leaks.bytes), s.leaks.count);
    print_groups(s.leaks.groups, s.leaks.bytes, s.leaks.groups_total);
  }
  return kExitOk;
}

int run_info(const std::string& file, bool as_json) {
  an::Trace t = open_trace(file, false);
  const store::TraceReader& r = t.reader();
  store::TraceMeta m = r.meta();
  json j{{"path", file},
         {"schema_version", store::kSchemaVersion},
         {"tool_version", m.tool_version},
         {"command_line", m.command_line},
         {"host", m.host},
         {"pid", m.pid},
         {"start_unix_ns", m.start_unix_ns},
         {"stack_depth", m.stack_depth},
         {"allocator_settings", m.allocator_settings},
         {"clean_end", r.clean_end()},
         {"finalized", r.finalized()},
         {"event_count", r.event_count()},
         {"dropped_count", r.dropped_count()},
         {"loss_counted", r.loss_counted()},
         {"duration_ns", t.duration_ns()}};
  const std::optional<std::string> writer_error = r.meta_value(store::meta_keys::kWriterError);
  j["writer_error"] = writer_error ? json(*writer_error) : json(nullptr);
  json devices = json::array();
  for (const an::DeviceRef& d : t.devices())
    devices.push_back(
        {{"device", d.name}, {"description", d.description}, {"capacity_bytes", d.capacity}});
  j["devices"] = devices;
  if (as_json) {
    print_json(j);
    return kExitOk;
  }
  fmt::print("{}\n", file);
  fmt::print("  schema version   {}\n", store::kSchemaVersion);
  fmt::print("  recorded by      tidemark {} on {} (pid {})\n", m.tool_version, m.host, m.pid);
  fmt::print("  command          {}\n", m.command_line);
  fmt::print("  events           {} ({})\n", r.event_count(),
             an::format_dropped(r.dropped_count(), r.loss_counted()));
  if (writer_error)
    fmt::print("  writer error     {} (the recording stopped writing)\n", *writer_error);
  fmt::print("  duration         {}\n", an::format_duration(t.duration_ns()));
  fmt::print("  stacks           {}\n",
             m.stack_depth ? fmt::format("{} frames", m.stack_depth) : std::string("off"));
  if (!m.allocator_settings.empty()) fmt::print("  TL_ALLOC_CONF    {}\n", m.allocator_settings);
  fmt::print("  clean end        {}\n",
             r.clean_end() ? "yes" : "no (the program crashed or was killed)");
  fmt::print("  finalized        {}\n",
             r.finalized() ? "yes" : fmt::format("no: run tidemark finalize {}", file));
  for (const an::DeviceRef& d : t.devices())
    fmt::print("  device           {}{}\n", d.name,
               d.description != d.name ? " (" + d.description + ")" : "");
  return kExitOk;
}

}  // namespace tidemark::cli
