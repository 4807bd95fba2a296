// tidemark replay: a trace's requests through the caching allocator under other settings
// (profiler/replay/replay.h, docs/replay.md): the recorded and replayed figures side by side,
// a ranked sweep of settings, or the replayed trace itself (-o).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/naming/units.h"
#include "profiler/replay/replay.h"

namespace tidemark::cli {

namespace rp = tidemark::replay;
using nlohmann::json;

namespace {

std::string bytes_text(uint64_t b) {
  return analysis::format_bytes(static_cast<int64_t>(b));
}

std::string change_text(uint64_t recorded, uint64_t replayed) {
  if (recorded == replayed) return "same";
  const int64_t d = static_cast<int64_t>(replayed) - static_cast<int64_t>(recorded);
  std::string s = (d > 0 ? "+" : "-") + analysis::format_bytes(d > 0 ? d : -d);
  if (recorded > 0)
    s += fmt::format(" ({:+.1f}%)", 100.0 * static_cast<double>(d) / static_cast<double>(recorded));
  return s;
}

std::string count_change(uint64_t recorded, uint64_t replayed) {
  if (recorded == replayed) return "same";
  return fmt::format("{:+d}", static_cast<int64_t>(replayed) - static_cast<int64_t>(recorded));
}

json oom_json(const analysis::Trace& trace, const std::optional<rp::Oom>& o) {
  if (!o) return nullptr;
  json live = json::array();
  for (const rp::Oom::Live& l : o->live)
    live.push_back({{"site", l.site}, {"bytes", l.bytes}, {"count", l.count}});
  return {{"time_ns", o->ts - std::min(o->ts, trace.origin_ns())},
          {"requested", o->requested},
          {"stream", o->stream},
          {"allocated", o->allocated},
          {"reserved", o->reserved},
          {"device_free", o->device_free},
          {"site", o->stack_id ? trace.site(o->stack_id).label : std::string()},
          {"live", live}};
}

json figures_json(const analysis::Trace& trace, const rp::Figures& f) {
  auto rel = [&](uint64_t ts) { return ts - std::min(ts, trace.origin_ns()); };
  return {{"peak_reserved", f.peak_reserved},
          {"peak_reserved_time_ns", rel(f.peak_reserved_ts)},
          {"peak_allocated", f.peak_allocated},
          {"peak_allocated_time_ns", rel(f.peak_allocated_ts)},
          {"device_allocations", f.device_allocations},
          {"unallocated_at_peak", f.unallocated_at_peak},
          {"largest_free_at_peak", f.largest_free_at_peak},
          {"final_reserved", f.final_reserved},
          {"final_allocated", f.final_allocated},
          {"failed_requests", f.failed_requests},
          {"first_oom", oom_json(trace, f.first_oom)}};
}

// What the reader should know about how exact a device's replay is (Note [Replay fidelity]).
std::vector<std::string> notes(const rp::Plan& p, const rp::Result& r, const rp::Settings& s) {
  std::vector<std::string> out;
  if (!p.settings_note.empty()) out.push_back(p.settings_note);
  if (r.rederived)
    out.push_back(
        fmt::format("the history began mid-run: the state before it was rederived under these "
                    "settings ({} blocks "
                    "live before the window allocated afresh, the window replayed once as its own "
                    "warm-up; Note "
                    "[Rederived start] in docs/replay.md)",
                    p.initial_blocks.size()));
  else if (!p.initial.empty() || !p.initial_blocks.empty())
    out.push_back(fmt::format(
        "the history began mid-run: the replay starts from the state rebuilt before it "
        "({} segments, {} blocks){}",
        p.initial.size(), p.initial_blocks.size(),
        r.unplaced
            ? fmt::format(", of which {} blocks could not be rebuilt at their address", r.unplaced)
            : std::string()));
  if (p.unknown_frees)
    out.push_back(fmt::format(
        "{} frees of memory allocated before the recording began were skipped", p.unknown_frees));
  if (r.capacity == rp::kUnlimited)
    out.push_back("capacity unknown: replayed without a limit (give --capacity)");
  for (const std::string& k : s.conf.ignored)
    out.push_back("ignored (no effect on the replay): " + k);
  return out;
}

struct Row {
  const char* what;
  uint64_t recorded, replayed;
  bool bytes;
};

void print_device(const analysis::Trace& trace, const rp::Plan& p, const rp::Result& r,
                  const rp::Settings& s) {
  const rp::Figures& a = p.recorded_figures;
  const rp::Figures& b = r.figures;
  fmt::print("{}  (capacity {}{})\n", p.device.name,
             r.capacity == rp::kUnlimited ? std::string("unlimited") : bytes_text(r.capacity),
             p.capacity && !s.capacity ? ", " + p.capacity_source : std::string());
  fmt::print("  {:<40} {:>14} {:>14}  {}\n", "", "recorded", "replayed", "change");
  const Row rows[] = {
      {"peak reserved", a.peak_reserved, b.peak_reserved, true},
      {"peak allocated", a.peak_allocated, b.peak_allocated, true},
      {"device allocations (cudaMalloc, cuMemMap)", a.device_allocations, b.device_allocations,
       false},
      {"reserved but unallocated at the peak", a.unallocated_at_peak, b.unallocated_at_peak, true},
      {"largest free block at the peak", a.largest_free_at_peak, b.largest_free_at_peak, true},
      {"allocations that failed (OOM)", a.failed_requests, b.failed_requests, false},
  };
  for (const Row& row : rows) {
    if (row.bytes)
      fmt::print("  {:<40} {:>14} {:>14}  {}\n", row.what, bytes_text(row.recorded),
                 bytes_text(row.replayed), change_text(row.recorded, row.replayed));
    else
      fmt::print("  {:<40} {:>14} {:>14}  {}\n", row.what, fmt::format("{}", row.recorded),
                 fmt::format("{}", row.replayed), count_change(row.recorded, row.replayed));
  }
  auto oom_line = [&](const char* who, const std::optional<rp::Oom>& o) {
    if (!o) return;
    fmt::print(
        "  first OOM ({}): at {}, {} requested on stream {:#x} with {} allocated, {} reserved, {} "
        "free",
        who, trace.time_text(o->ts), bytes_text(o->requested), o->stream, bytes_text(o->allocated),
        bytes_text(o->reserved), bytes_text(o->device_free));
    if (o->stack_id) fmt::print(", from {}", trace.site(o->stack_id).label);
    fmt::print("\n");
    for (const rp::Oom::Live& l : o->live)
      fmt::print("    live then: {:>12} in {:>6} blocks  {}\n", bytes_text(l.bytes), l.count,
                 l.site);
  };
  oom_line("recorded", a.first_oom);
  oom_line("replayed", b.first_oom);
  for (const std::string& n : notes(p, r, s)) fmt::print("  note: {}\n", n);
}

// Sweep rows ranked: no OOM first, then the lowest reserved peak, then the fewest device
// allocations, then the grid's order.
std::vector<size_t> ranked(const std::vector<rp::Result>& results) {
  std::vector<size_t> order(results.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const rp::Figures& a = results[x].figures;
    const rp::Figures& b = results[y].figures;
    if ((a.failed_requests > 0) != (b.failed_requests > 0)) return a.failed_requests == 0;
    if (a.peak_reserved != b.peak_reserved) return a.peak_reserved < b.peak_reserved;
    return a.device_allocations < b.device_allocations;
  });
  return order;
}

}  // namespace

int run_replay(const ReplayArgs& a) {
  analysis::Trace trace = open_trace(a.file);
  rp::Settings settings;
  std::vector<rp::Plan> plans;
  try {
    std::vector<int64_t> devices;
    if (!a.device.empty()) devices.push_back(trace.device(a.device).id);
    {
      Progress progress("reading " + a.file);
      plans = rp::build_plans(trace, devices);
    }
    settings.conf = a.alloc_conf ? rp::parse_alloc_conf(*a.alloc_conf) : plans.front().recorded;
  } catch (const rp::SettingsError& e) {
    throw UsageError(e.what());
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  // --capacity: one size, or with --sweep a comma-separated list (the grid is replayed on
  // each).
  std::vector<std::optional<uint64_t>> capacities{std::nullopt};
  if (a.capacity) {
    capacities.clear();
    const std::string& list = *a.capacity;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      capacities.push_back(parse_capacity_option("--capacity", list.substr(start, comma - start)));
      start = comma + 1;
    }
    if (capacities.size() > 1 && !a.sweep)
      throw UsageError("--capacity " + list +
                       ": a list of capacities is for --sweep; give one size");
    settings.capacity = capacities.front();
  }
  if (a.memory_fraction && !(*a.memory_fraction >= 0 && *a.memory_fraction <= 1))
    throw UsageError(fmt::format(
        "--memory-fraction {}: expected a share of the capacity from 0 to 1", *a.memory_fraction));
  settings.memory_fraction = a.memory_fraction;
  settings.label = settings.conf.text().empty() ? "(defaults)" : settings.conf.text();
  const std::string recorded_text =
      plans.front().recorded.text().empty() ? "(defaults)" : plans.front().recorded.text();

  if (a.sweep) {
    std::vector<rp::Settings> grid;
    std::vector<std::string> conf_of;  // each row's settings in PYTORCH_CUDA_ALLOC_CONF syntax
    for (const std::optional<uint64_t>& c : capacities)
      for (rp::Settings s : rp::default_sweep()) {
        conf_of.push_back(s.conf.text().empty() ? std::string() : s.label);
        s.capacity = c;
        if (capacities.size() > 1) s.label += " on " + bytes_text(*c);
        grid.push_back(std::move(s));
      }
    json j = {{"json_version", analysis::kJsonSchemaVersion},
              {"path", a.file},
              {"recorded_settings", plans.front().recorded.text()},
              {"devices", json::array()}};
    for (const rp::Plan& p : plans) {
      std::vector<rp::Result> results;
      {
        Progress progress(fmt::format("replaying {} settings of {}", grid.size(), p.device.name));
        results = rp::sweep(p, grid, a.threads);
      }
      const std::vector<size_t> order = ranked(results);
      if (a.json) {
        json rows = json::array();
        for (size_t i : order)
          rows.push_back(
              {{"settings", conf_of[i]},
               {"capacity",
                results[i].capacity == rp::kUnlimited ? json(nullptr) : json(results[i].capacity)},
               {"replayed", figures_json(trace, results[i].figures)}});
        j["devices"].push_back({{"device", p.device.name},
                                {"capacity", results.front().capacity == rp::kUnlimited
                                                 ? json(nullptr)
                                                 : json(results.front().capacity)},
                                {"recorded", figures_json(trace, p.recorded_figures)},
                                {"ranked", rows}});
        continue;
      }
      fmt::print("{}: {} settings replayed (recorded under {}; capacity {})\n", p.device.name,
                 grid.size(), recorded_text,
                 capacities.size() > 1 ? std::string("as listed")
                 : results.front().capacity == rp::kUnlimited
                     ? std::string("unlimited")
                     : bytes_text(results.front().capacity));
      // The settings last: their text varies in length.
      fmt::print("  {:>4} {:>13} {:>20} {:>6} {:>12} {:>5}  {}\n", "rank", "peak reserved",
                 "vs recorded", "allocs", "unallocated", "OOMs", "settings");
      fmt::print("  {:>4} {:>13} {:>20} {:>6} {:>12} {:>5}  {}\n", "-",
                 bytes_text(p.recorded_figures.peak_reserved), "",
                 p.recorded_figures.device_allocations,
                 bytes_text(p.recorded_figures.unallocated_at_peak),
                 p.recorded_figures.failed_requests, "(as recorded)");
      int rank = 0;
      for (size_t i : order) {
        const rp::Figures& f = results[i].figures;
        fmt::print(
            "  {:>4} {:>13} {:>20} {:>6} {:>12} {:>5}  {}\n", ++rank, bytes_text(f.peak_reserved),
            change_text(p.recorded_figures.peak_reserved, f.peak_reserved), f.device_allocations,
            bytes_text(f.unallocated_at_peak), f.failed_requests, grid[i].label);
      }
    }
    if (a.json) fmt::print("{}\n", json_text(j));
    return kExitOk;
  }

  std::vector<rp::Result> results;
  {
    Progress progress("replaying " + a.file);
    for (const rp::Plan& p : plans) results.push_back(rp::run(p, settings, {}, &trace));
  }
  if (!a.output.empty()) {
    Progress progress("writing " + a.output);
    rp::write_replayed_trace(trace, plans, settings, a.output);
  }
  if (a.json) {
    json devices = json::array();
    for (size_t i = 0; i < plans.size(); ++i) {
      const rp::Plan& p = plans[i];
      devices.push_back(
          {{"device", p.device.name},
           {"capacity",
            results[i].capacity == rp::kUnlimited ? json(nullptr) : json(results[i].capacity)},
           {"capacity_source", settings.capacity ? std::string("given") : p.capacity_source},
           {"recorded", figures_json(trace, p.recorded_figures)},
           {"replayed", figures_json(trace, results[i].figures)},
           {"unplaced_initial_blocks", results[i].unplaced},
           {"notes", notes(p, results[i], settings)}});
    }
    json j = {{"json_version", analysis::kJsonSchemaVersion},
              {"path", a.file},
              {"settings", settings.conf.text()},
              {"ignored_settings", settings.conf.ignored},
              {"recorded_settings", plans.front().recorded.text()},
              {"memory_fraction", a.memory_fraction ? json(*a.memory_fraction) : json(nullptr)},
              {"output", a.output.empty() ? json(nullptr) : json(a.output)},
              {"devices", devices}};
    fmt::print("{}\n", json_text(j));
    return kExitOk;
  }
  fmt::print("{}: replayed under {} (recorded under {})\n", a.file, settings.label, recorded_text);
  for (size_t i = 0; i < plans.size(); ++i) print_device(trace, plans[i], results[i], settings);
  if (!a.output.empty()) fmt::print("replayed trace written to {}\n", a.output);
  return kExitOk;
}

}  // namespace tidemark::cli
