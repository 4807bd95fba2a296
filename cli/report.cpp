// tidemark summary, info, finalize, top, leaks, steps, syncs, diff: text for people, --json
// for scripts (the contract is in docs/cli.md).
#include <fmt/core.h>

#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/flame.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/units.h"
#include "profiler/record/recorder.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::cli {

namespace an = analysis;
using nlohmann::json;

namespace {

void print(const json& j) {
  std::cout << json_text(j) << '\n';
}

std::string pct(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:5.1f}%",
                                 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : "     -";
}

void print_groups(const std::vector<an::Group>& groups, int64_t total, uint64_t groups_total) {
  for (const an::Group& g : groups) {
    fmt::print("  {:>12} {} {:>7}  {}\n", an::format_bytes(g.bytes), pct(g.bytes, total), g.count,
               g.label);
    if (!g.frames.empty())
      for (size_t i = 1; i < g.frames.size() && i < 12; ++i)
        fmt::print("  {:>36}{}\n", "", g.frames[i]);
  }
  if (groups_total > groups.size()) fmt::print("  ... and {} more\n", groups_total - groups.size());
}

// "TITLE of DEVICE (BYTES in COUNT UNITS, T s), by site:" and the groups.
void print_breakdown(const char* title, const an::LiveBreakdown& b, const char* units,
                     bool synthetic_times) {
  fmt::print("\n{} of {} ({} in {} {}, {}), by site:\n", title, b.device, an::format_bytes(b.bytes),
             b.count, units, an::format_time_point(b.time_ns, synthetic_times));
  print_groups(b.groups, b.bytes, b.groups_total);
}

an::GroupBy group_by(const std::string& s) {
  auto g = an::parse_group_by(s);
  if (!g) throw UsageError("--by " + s + ": expected site, stack, scope or category");
  return *g;
}

std::optional<int64_t> device_id(const an::Trace& t, const std::string& spec) {
  if (spec.empty()) return std::nullopt;
  return select_devices(t, spec).front().id;
}

}  // namespace

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
  s.path = a.file;  // a snapshot's own name, not its temporary trace's
  if (a.json) {
    print(s);
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
    print(j);
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

int run_finalize(const std::string& file, bool force) {
  // Checks the file (its meta included) and names the problem before anything is written; a
  // trace of an older schema is upgraded.
  int version = 0;
  {
    const auto r = store::TraceReader::open(file, store::TraceReader::Require::upgradable);
    version = r.schema_version();
    const store::TraceMeta m = r.meta();
    // Finalizing a trace still being written would break the recording (Note [Live
    // recordings]); --force for a pid that now names another process.
    const RecordingProcesses p = recording_processes(m.host, m.pid, m.finalizer_pid);
    if (!force && !r.finalized() && p.alive_pid != 0) {
      throw UsageError(
          fmt::format("{}: still being recorded: {}; finalize it once that process has ended, "
                      "or with --force if pid {} is not it",
                      file, p.who(), p.alive_pid));
    }
  }
  {
    Progress p("finalizing " + file);
    record::finalize_trace(file);
  }
  an::Trace t = open_trace(file);
  fmt::print(
      "{}: finalized ({} events){}\n", file, t.reader().event_count(),
      version != store::kSchemaVersion
          ? fmt::format("; upgraded from schema version {} to {}", version, store::kSchemaVersion)
          : "");
  return kExitOk;
}

namespace {

// Brendan Gregg's folded stacks, which flamegraph.pl, inferno and speedscope read: one line
// per stack, its frames outermost first joined by ';' (without the C runtime's start-up
// frames: analysis::startup_frames), a space, then its bytes. A ';' inside a
// frame would split it, so it becomes ','; an allocation without a stack is "(no stack)".
// With user frames (the default) each run of library frames is one frame, as in the GUI's
// flame graph (Note [Folded library frames]); `--frames all` keeps every frame.
std::string folded_stack(const an::Trace& t, const an::Group& g) {
  if (g.frames.empty()) return g.label;
  // A stack cut short by the capture depth lacks its outer callers: it hangs from one frame
  // that says so, rather than passing its outermost recorded frame off as a root.
  std::string line = an::group_truncated(t, g) ? an::cut_stack_frame(t.stack_depth()) + ";" : "";
  const size_t n = g.frames.size() - an::startup_frames(g.frames);
  auto frame = [&](size_t k) -> const std::string& {
    return g.frames[n - 1 - k];
  };  // outermost first
  std::vector<bool> library;
  for (size_t k = 0; k < n; ++k)
    library.push_back(n - 1 - k < g.library.size() && g.library[n - 1 - k]);
  const auto runs = t.frames_mode() == an::Frames::user ? an::library_runs(library)
                                                        : std::vector<std::pair<size_t, size_t>>{};
  auto put = [&](std::string_view f, bool first) {
    if (!first) line += ';';
    for (char c : f) line += c == ';' ? ',' : c;
  };
  auto run = runs.begin();
  for (size_t k = 0; k < n;) {
    if (run != runs.end() && run->first == k) {
      put(an::folded_frame_label(run->second - run->first, frame(k)), k == 0);
      k = run++->second;
    } else {
      put(frame(k), k == 0);
      ++k;
    }
  }
  return line;
}

void print_folded(const an::Trace& t, const std::vector<an::Group>& groups) {
  for (const an::Group& g : groups) fmt::print("{} {}\n", folded_stack(t, g), g.bytes);
}

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
    print(*b);
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
    print(b);
    return kExitOk;
  }
  fmt::print("{}: live on {} at {}: {} in {} allocations, by {}:\n", a.file, b.device,
             an::format_time_point(b.time_ns, t.synthetic_times(), 6), an::format_bytes(b.bytes),
             b.count, a.by);
  print_groups(b.groups, b.bytes, b.groups_total);
  return kExitOk;
}

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
    print(j);
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
    print(json{{"device", d.name},
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

int run_syncs(const SimpleArgs& a) {
  an::Trace t = open_trace(a.file);
  an::SyncReport r = an::syncs(t, a.limit);
  if (a.json) {
    print(r);
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
    print(d);
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
