// tidemark check: a CI gate. Each limit given is a check; any violation exits 1 with a message
// naming the limit, the measured value and the top contributors.
#include <fmt/core.h>

#include <fstream>
#include <functional>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/output_file.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace an = analysis;

namespace {

struct Result {
  std::string name;  // the option: "max-peak-allocated"
  bool passed = true;
  std::string message;  // what was measured against what
};

std::string contributors(const std::vector<an::Group>& groups, size_t n = 3) {
  std::string out;
  for (size_t i = 0; i < groups.size() && i < n; ++i)
    out +=
        fmt::format("{}{} {}", i ? "; " : "", an::format_bytes(groups[i].bytes), groups[i].label);
  return out.empty() ? "(none)" : out;
}

std::string bytes_both(int64_t v) {
  return fmt::format("{} ({} bytes)", an::format_bytes(v), v);
}

void write_junit(analysis::OutputFile& out, const std::string& trace,
                 const std::vector<Result>& results) {
  const std::string& path = out.path();
  std::ofstream& f = out.stream();
  size_t failures = 0;
  for (const Result& r : results) failures += !r.passed;
  f << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  f << fmt::format("<testsuites><testsuite name=\"tidemark check\" tests=\"{}\" failures=\"{}\">\n",
                   results.size(), failures);
  for (const Result& r : results) {
    f << fmt::format("  <testcase classname=\"tidemark.check.{}\" name=\"{}\"",
                     markup_escape(trace), r.name);
    if (r.passed)
      f << fmt::format("><system-out>{}</system-out></testcase>\n", markup_escape(r.message));
    else
      f << fmt::format("><failure message=\"{}\"/></testcase>\n", markup_escape(r.message));
  }
  f << "</testsuite></testsuites>\n";
  if (!f) throw UsageError("--junit " + path + ": cannot write the file");
  out.commit();
}

// The checks of one trace (`file`), limits parsed.
std::vector<Result> checks_of(const CheckArgs& a, const std::string& file,
                              std::optional<uint64_t> max_alloc,
                              std::optional<uint64_t> max_reserved,
                              std::optional<uint64_t> max_leaked,
                              const std::set<std::string>& finding_ids) {
  an::Trace t = open_trace(file);
  std::vector<Result> results;
  std::vector<an::DeviceSummary> devices;
  for (const an::DeviceRef& d : t.devices()) devices.push_back(an::summarize_device(t, d));

  auto top_at_peak = [&](const an::DeviceSummary& d) {
    auto at = an::peak_point(t, d.device_id);
    return at ? contributors(an::live_at(t, d.device_id, *at, an::GroupBy::site, 3).groups)
              : std::string("(none)");
  };
  auto peak_check = [&](const char* name, const char* what, uint64_t limit,
                        int64_t an::DeviceSummary::*field) {
    Result r{name, true, ""};
    for (const an::DeviceSummary& d : devices) {
      int64_t v = d.*field;
      if (v > static_cast<int64_t>(limit)) {
        r.passed = false;
        r.message += fmt::format("{}--{} {}: {} on {} is {}; top at the allocated peak: {}",
                                 r.message.empty() ? "" : "\n", name, bytes_both(limit), what,
                                 d.device, bytes_both(v), top_at_peak(d));
      }
    }
    if (r.passed) {
      int64_t worst = 0;
      for (const auto& d : devices) worst = std::max(worst, d.*field);
      r.message =
          fmt::format("--{} {}: {} is {}", name, bytes_both(limit), what, bytes_both(worst));
    }
    results.push_back(r);
  };
  if (max_alloc)
    peak_check("max-peak-allocated", "peak allocated", *max_alloc,
               &an::DeviceSummary::peak_allocated_bytes);
  if (max_reserved)
    peak_check("max-peak-reserved", "peak reserved", *max_reserved,
               &an::DeviceSummary::peak_reserved_bytes);
  if (max_leaked) {
    an::LeakReport l = an::leaks(t, std::nullopt, an::GroupBy::site, 3);
    Result r{"max-leaked", l.bytes <= static_cast<int64_t>(*max_leaked), ""};
    r.message =
        fmt::format("--max-leaked {}: still allocated at the end: {} in {} allocations",
                    bytes_both(static_cast<int64_t>(*max_leaked)), bytes_both(l.bytes), l.count);
    if (!r.passed) r.message += "; top leaks: " + contributors(l.groups);
    results.push_back(r);
  }
  if (a.max_syncs_per_step) {
    an::SyncReport s = an::syncs(t, 3);
    Result r{"max-syncs-per-step", s.max_per_step <= *a.max_syncs_per_step, ""};
    r.message =
        fmt::format("--max-syncs-per-step {}: at most {} syncs in a step{}", *a.max_syncs_per_step,
                    s.max_per_step, s.max_step ? fmt::format(" (step {})", *s.max_step) : "");
    if (!r.passed) {
      std::string sites;
      for (size_t i = 0; i < s.sites.size(); ++i)
        sites += fmt::format("{}{} x {}", i ? "; " : "", s.sites[i].count, s.sites[i].label);
      r.message += "; top sync sites: " + sites;
    }
    results.push_back(r);
  }
  if (!a.baseline.empty()) {
    an::Trace base = open_trace(a.baseline);
    Result r{"max-increase", true, ""};
    const double limit = *a.max_increase;
    std::string detail;
    // t's devices come first, in the order of `devices` (Note [Matching devices]).
    const std::vector<an::DeviceMatch> matched = an::match_devices(t, base);
    for (size_t i = 0; i < devices.size(); ++i) {
      const an::DeviceSummary& d = devices[i];
      const an::DeviceRef* bd = matched[i].b;
      if (!bd) continue;
      an::DeviceSummary b = an::summarize_device(base, *bd);
      double inc = b.peak_allocated_bytes > 0
                       ? 100.0 *
                             static_cast<double>(d.peak_allocated_bytes - b.peak_allocated_bytes) /
                             static_cast<double>(b.peak_allocated_bytes)
                       : (d.peak_allocated_bytes > 0 ? 100.0 : 0.0);
      std::string line = fmt::format("peak allocated on {} is {} against {} in {} ({:+.1f}%)",
                                     d.device, bytes_both(d.peak_allocated_bytes),
                                     bytes_both(b.peak_allocated_bytes), a.baseline, inc);
      if (inc > limit) {
        r.passed = false;
        an::TraceDiff diff = an::diff(base, t);
        std::vector<an::Group> grown;
        for (const auto& s : diff.sites)
          if (s.device == d.device) {
            for (const auto* v : {&s.changed, &s.added})
              for (const an::SiteDiff& x : *v)
                if (x.delta() > 0) grown.push_back({x.key, x.label, x.delta(), 0, 0, {}});
          }
        std::sort(grown.begin(), grown.end(),
                  [](const an::Group& x, const an::Group& y) { return x.bytes > y.bytes; });
        line += "; grew most: " + contributors(grown);
      }
      detail += (detail.empty() ? "" : "\n") + fmt::format("--max-increase {}%: {}", limit, line);
    }
    r.message = detail.empty() ? fmt::format("--max-increase {}%: no device in common with {}",
                                             limit, a.baseline)
                               : detail;
    results.push_back(r);
  }

  if (a.no_findings) {
    // Every finding of the chosen detectors that diagnose shows fails the check, each named
    // with its site: moderate and major ones, minor ones too with --all (Note [Severity]).
    diagnose::Diagnosis d = diagnose::diagnose(t, finding_ids, a.all_findings);
    Result r{"no-findings", d.findings.empty(), ""};
    const std::string which = finding_ids.empty() ? "" : " " + *a.no_findings;
    for (const diagnose::Finding& f : d.findings)
      r.message +=
          fmt::format("{}--no-findings{}: {} on {} at {}: {}", r.message.empty() ? "" : "\n", which,
                      f.id, f.device.empty() ? "-" : f.device,
                      f.site.empty() ? "(no stack recorded)" : f.site, f.title);
    if (r.passed) {
      r.message = fmt::format("--no-findings{}: no findings", which);
      if (d.minor_hidden)
        r.message +=
            fmt::format(" ({} minor, which do not fail the check without --all)", d.minor_hidden);
      if (!d.skipped.empty()) {
        std::string ids;
        for (const diagnose::SkippedDetector& s : d.skipped)
          ids += (ids.empty() ? "" : ", ") + s.id;
        r.message += fmt::format(" (skipped, the trace lacks their data: {})", ids);
      }
    }
    results.push_back(r);
  }

  return results;
}

// Note [Several ranks] (cli/ranks.cpp): every rank's trace checked against the same limits; the
// run fails when any rank fails, and says which.
int check_ranks(const CheckArgs& a,
                const std::function<std::vector<Result>(const std::string&)>& checks_of_file,
                analysis::OutputFile* junit) {
  const std::vector<RankedFile> ranks = ranked_files(a.files);
  std::vector<Result> all;
  std::vector<std::string> failed;
  nlohmann::json arr = nlohmann::json::array(), failed_ranks = nlohmann::json::array();
  for (const RankedFile& rank : ranks) {
    const std::vector<Result> results = checks_of_file(rank.path);
    bool ok = true;
    nlohmann::json checks = nlohmann::json::array();
    for (const Result& r : results) {
      ok = ok && r.passed;
      checks.push_back({{"check", r.name}, {"passed", r.passed}, {"message", r.message}});
      all.push_back({fmt::format("rank{}.{}", rank.rank, r.name), r.passed, r.message});
    }
    if (!ok) {
      failed.push_back(fmt::format("rank {} ({})", rank.rank, rank.path));
      failed_ranks.push_back(rank.rank);
    }
    arr.push_back({{"rank", rank.rank}, {"path", rank.path}, {"passed", ok}, {"checks", checks}});
    if (a.json) continue;
    fmt::print("rank {} ({}):\n", rank.rank, rank.path);
    for (const Result& r : results) {
      std::string msg = r.message;
      for (size_t pos = 0; (pos = msg.find('\n', pos)) != std::string::npos; pos += 8)
        msg.replace(pos, 1, "\n        ");
      fmt::print("  {} {}\n", r.passed ? "ok  " : "FAIL", msg);
    }
  }
  std::string paths;
  for (const RankedFile& rank : ranks) paths += (paths.empty() ? "" : ",") + rank.path;
  if (junit) write_junit(*junit, paths, all);
  if (a.json) {
    std::cout << json_text(nlohmann::json{{"paths", a.files},
                                          {"passed", failed.empty()},
                                          {"failed_ranks", failed_ranks},
                                          {"ranks", arr}})
              << '\n';
  } else {
    std::string which;
    for (const std::string& f : failed) which += (which.empty() ? "" : ", ") + f;
    fmt::print("{} ranks: {}\n", ranks.size(),
               failed.empty() ? std::string("all checks passed on every rank")
                              : "check failed on " + which);
  }
  return failed.empty() ? kExitOk : kExitCheckFailed;
}

}  // namespace

int run_check(const CheckArgs& a) {
  if (!a.max_peak_allocated && !a.max_peak_reserved && !a.max_leaked && !a.max_syncs_per_step &&
      a.baseline.empty() && !a.no_findings)
    throw UsageError(
        "check: give at least one limit (--max-peak-allocated, --max-peak-reserved, "
        "--max-leaked, --max-syncs-per-step, --baseline with --max-increase, "
        "--no-findings)");
  // Parse every limit before reading anything, so bad flags fail fast.
  std::optional<uint64_t> max_alloc, max_reserved, max_leaked;
  if (a.max_peak_allocated)
    max_alloc = parse_size_option("--max-peak-allocated", *a.max_peak_allocated);
  if (a.max_peak_reserved)
    max_reserved = parse_size_option("--max-peak-reserved", *a.max_peak_reserved);
  if (a.max_leaked) max_leaked = parse_size_option("--max-leaked", *a.max_leaked);
  std::set<std::string> finding_ids;
  if (a.no_findings) finding_ids = parse_finding_ids("--no-findings", *a.no_findings);
  // Refused before anything is read when it is an input (Note [Output files]).
  std::optional<analysis::OutputFile> junit;
  if (!a.junit.empty()) {
    std::vector<std::string> inputs = a.files.empty() ? std::vector<std::string>{a.file} : a.files;
    if (!a.baseline.empty()) inputs.push_back(a.baseline);
    junit.emplace(a.junit, inputs);
  }

  if (a.files.size() > 1)  // Note [Several ranks] in cli/ranks.cpp
    return check_ranks(
        a,
        [&](const std::string& file) {
          return checks_of(a, file, max_alloc, max_reserved, max_leaked, finding_ids);
        },
        junit ? &*junit : nullptr);
  std::vector<Result> results =
      checks_of(a, a.file, max_alloc, max_reserved, max_leaked, finding_ids);
  bool ok = true;
  for (const Result& r : results) ok = ok && r.passed;
  if (junit) write_junit(*junit, a.file, results);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Result& r : results)
      arr.push_back({{"check", r.name}, {"passed", r.passed}, {"message", r.message}});
    std::cout << json_text(nlohmann::json{{"path", a.file}, {"passed", ok}, {"checks", arr}})
              << '\n';
  } else {
    for (const Result& r : results) {
      std::string msg = r.message;
      for (size_t pos = 0; (pos = msg.find('\n', pos)) != std::string::npos; pos += 6)
        msg.replace(pos, 1, "\n      ");
      fmt::print("{} {}\n", r.passed ? "ok  " : "FAIL", msg);
    }
    fmt::print("{}: {}\n", a.file, ok ? "all checks passed" : "check failed");
  }
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace tidemark::cli
