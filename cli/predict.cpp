// tidemark predict: the peak at a size the program was not run at (profiler/predict/predict.h,
// docs/predict.md), from runs given as SIZE=FILE; snapshots are imported on the way.
#include <fmt/core.h>

#include <cmath>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/naming/units.h"
#include "profiler/predict/predict.h"
#include "profiler/store/trace_reader.h"

namespace tidemark::cli {

namespace pr = tidemark::predict;
namespace rp = tidemark::replay;
using nlohmann::json;

namespace {

std::string bytes_text(uint64_t b) {
  return analysis::format_bytes(static_cast<int64_t>(b));
}

std::string value_text(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15) return fmt::format("{}", static_cast<int64_t>(x));
  return fmt::format("{:g}", x);
}

json value_json(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15) return static_cast<int64_t>(x);
  return x;
}

double parse_value(const std::string& what, const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x) || x <= 0)
    throw UsageError(what + ": '" + text + "' is not a positive number");
  return x;
}

json site_json(const pr::SiteAtPeak& s) {
  return {{"site", s.site},
          {"growth", pr::growth_text(s.growth)},
          {"bytes", s.bytes},
          {"count", s.count},
          {"largest_run_bytes", s.largest_run_bytes}};
}

}  // namespace

int run_predict(const PredictArgs& a) {
  // The runs: SIZE=FILE.
  struct Given {
    double x;
    std::string path;
  };
  std::vector<Given> given;
  for (const std::string& r : a.runs) {
    const size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == r.size())
      throw UsageError("run '" + r + "': expected SIZE=FILE, e.g. 64=batch64.db");
    given.push_back({parse_value("run '" + r + "'", r.substr(0, eq)), r.substr(eq + 1)});
  }
  if (given.size() < 2)
    throw UsageError("predict needs runs at two or more sizes (SIZE=FILE SIZE=FILE ...)");
  std::vector<double> targets;
  for (size_t start = 0; start <= a.at.size();) {
    size_t comma = a.at.find(',', start);
    if (comma == std::string::npos) comma = a.at.size();
    targets.push_back(parse_value("--at", a.at.substr(start, comma - start)));
    start = comma + 1;
  }
  pr::Options options;
  options.sites = a.sites;
  try {
    for (const std::string& c : a.alloc_confs) {
      rp::Settings s;
      s.conf = rp::parse_alloc_conf(c);
      s.label = s.conf.text().empty() ? "(defaults)" : s.conf.text();
      options.settings.push_back(std::move(s));
    }
  } catch (const rp::SettingsError& e) {
    throw UsageError(std::string("--alloc-conf: ") + e.what());
  }
  if (a.capacity) options.capacity = parse_capacity_option("--capacity", *a.capacity);

  std::vector<analysis::Trace> traces;
  traces.reserve(given.size());
  for (const Given& g : given) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(g.path, ec)) throw UsageError(g.path + ": no such file");
    traces.push_back(open_trace(g.path));  // a snapshot is imported (Note [Snapshots as traces])
  }
  std::vector<pr::Run> runs;
  for (size_t i = 0; i < given.size(); ++i) {
    if (!a.device.empty()) {
      try {
        traces[i].device(a.device);
      } catch (const std::invalid_argument& e) {
        throw UsageError(given[i].path + ": --device: " + e.what());
      }
    }
    runs.push_back({given[i].x, &traces[i],
                    a.device.empty() ? std::string() : traces[i].device(a.device).name});
  }
  pr::Model model = [&] {
    Progress p("aligning the runs");
    try {
      return pr::Model::build(runs);
    } catch (const pr::PredictError& e) {
      throw UsageError(e.what());
    }
  }();
  if (options.settings.empty()) {
    rp::Settings s;
    s.conf = model.recorded_settings();
    s.label = s.conf.text().empty() ? "(defaults)" : s.conf.text();
    options.settings.push_back(std::move(s));
  }
  const std::optional<uint64_t> capacity =
      options.capacity ? options.capacity : model.recorded_capacity();
  const std::string capacity_source = options.capacity ? "given"
                                      : capacity       ? "the largest run's"
                                                       : "";

  std::vector<pr::Target> results;
  {
    Progress p("predicting");
    for (double x : targets) results.push_back(model.at(x, options));
  }
  std::vector<pr::Model::Fitting> fitting;
  if (capacity) {
    Progress p("searching the largest size that fits");
    fitting = model.largest_fitting(*capacity, options);
  }
  std::vector<std::string> notes = model.notes();
  for (const pr::Target& t : results)
    if (t.aligned_share < 0.9)
      notes.push_back(
          fmt::format("at {} only {:.0f}% of the predicted peak lines up with the other runs: they "
                      "may differ in more than "
                      "the one size (the number of layers, the model, a code path), so take it as "
                      "a rough guide",
                      value_text(t.at), 100 * t.aligned_share));
  if (!capacity) notes.push_back("capacity unknown: give --capacity to know what fits");

  if (a.json) {
    json runs_j = json::array();
    for (size_t i = 0; i < given.size(); ++i)
      runs_j.push_back({{"at", value_json(given[i].x)}, {"path", given[i].path}});
    json settings_j = json::array();
    for (const rp::Settings& s : options.settings) settings_j.push_back(s.conf.text());
    json preds = json::array();
    for (const pr::Target& t : results) {
      json by = json::array();
      for (const pr::SettingsPeak& s : t.settings)
        by.push_back({{"settings", s.settings},
                      {"peak_reserved_bytes", s.peak_reserved},
                      {"peak_allocated_bytes", s.peak_allocated},
                      {"failed_requests", s.failed},
                      {"fits", s.fits ? json(*s.fits) : json(nullptr)}});
      json sites = json::array();
      for (const pr::SiteAtPeak& s : t.sites) sites.push_back(site_json(s));
      const pr::SettingsPeak& first = t.settings.front();
      preds.push_back({{"at", value_json(t.at)},
                       {"peak_requested_bytes", t.peak_requested},
                       {"peak_reserved_bytes", first.peak_reserved},
                       {"peak_allocated_bytes", first.peak_allocated},
                       {"aligned_share", t.aligned_share},
                       {"exact_share", t.exact_share},
                       {"fits", first.fits ? json(*first.fits) : json(nullptr)},
                       {"peak_site", t.peak_site},
                       {"peak_phase", t.peak_phase},
                       {"by_settings", by},
                       {"sites", sites}});
    }
    json fit_j = json::array();
    for (size_t i = 0; i < fitting.size(); ++i)
      fit_j.push_back({{"settings", options.settings[i].conf.text()},
                       {"at", fitting[i].x ? value_json(*fitting[i].x) : json(nullptr)},
                       {"capped", fitting[i].capped}});
    json j = {
        {"json_version", analysis::kJsonSchemaVersion},
        {"device", model.device()},
        {"runs", runs_j},
        {"settings", settings_j},
        {"capacity", capacity ? json(*capacity) : json(nullptr)},
        {"allocations", model.allocations()},
        {"aligned_allocations", model.aligned_allocations()},
        {"predictions", preds},
        {"largest_fitting",
         !fitting.empty() && fitting.front().x ? value_json(*fitting.front().x) : json(nullptr)},
        {"largest_fitting_by_settings", fit_j},
        {"notes", notes}};
    fmt::print("{}\n", json_text(j));
    return kExitOk;
  }

  std::string sizes;
  for (const Given& g : given) sizes += (sizes.empty() ? "" : ", ") + value_text(g.x);
  fmt::print("{}: {} runs at {}; {} of the largest run's {} allocations aligned ({:.1f}%)\n",
             model.device(), given.size(), sizes, model.aligned_allocations(), model.allocations(),
             model.allocations() ? 100.0 * static_cast<double>(model.aligned_allocations()) /
                                       static_cast<double>(model.allocations())
                                 : 0.0);
  fmt::print("capacity {}\n", capacity ? bytes_text(*capacity) + " (" + capacity_source + ")"
                                       : std::string("unknown"));
  for (const pr::Target& t : results) {
    fmt::print("\nat {}:\n", value_text(t.at));
    fmt::print("  {:<20} {:>12}   {:.1f}% from aligned allocations, {:.1f}% fitted exactly\n",
               "peak requested", bytes_text(t.peak_requested), 100 * t.aligned_share,
               100 * t.exact_share);
    for (size_t i = 0; i < t.settings.size(); ++i) {
      const pr::SettingsPeak& s = t.settings[i];
      fmt::print("  {:<20} {:>12}   {}{}\n", "peak reserved", bytes_text(s.peak_reserved),
                 options.settings[i].label, s.fits ? (*s.fits ? ": fits" : ": does not fit") : "");
    }
    fmt::print("  {:<20} {} ({})\n", "peak reached by", t.peak_site, t.peak_phase);
    if (!t.sites.empty()) {
      fmt::print("  {:>12} {:>12}  {:<9} {}\n", "at " + value_text(t.at),
                 "at " + value_text(model.largest_x()), "growth", "site (live at the peak)");
      for (const pr::SiteAtPeak& s : t.sites)
        fmt::print("  {:>12} {:>12}  {:<9} {}\n", bytes_text(s.bytes),
                   bytes_text(s.largest_run_bytes), pr::growth_text(s.growth), s.site);
    }
  }
  if (capacity) {
    fmt::print("\nlargest size that fits {}:\n", bytes_text(*capacity));
    for (size_t i = 0; i < fitting.size(); ++i)
      fmt::print("  {:>12}   {}\n",
                 fitting[i].x ? value_text(*fitting[i].x) + (fitting[i].capped ? " or more" : "")
                              : std::string("none"),
                 options.settings[i].label);
  }
  for (const std::string& n : notes) fmt::print("note: {}\n", n);
  return kExitOk;
}

}  // namespace tidemark::cli
