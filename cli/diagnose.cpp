// tidemark diagnose: the pitfalls the detectors of profiler/diagnose/diagnose.h find in a
// trace, ranked, each with its evidence, code site and fix; then the detectors that could not
// run and why. --json prints the contract documented in docs/cli.md.
#include <fmt/core.h>

#include <iostream>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace an = analysis;
using nlohmann::json;

std::set<std::string> parse_finding_ids(const std::string& option, const std::string& list) {
  std::set<std::string> ids;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string id = list.substr(start, comma - start);
    if (!id.empty()) ids.insert(id);
    start = comma + 1;
  }
  for (const std::string& id : ids) {
    bool known = false;
    for (const diagnose::DetectorInfo& d : diagnose::detectors()) known = known || d.id == id;
    if (known) continue;
    std::string names;
    for (const diagnose::DetectorInfo& d : diagnose::detectors())
      names += (names.empty() ? "" : ", ") + std::string(d.id);
    throw UsageError(option + " " + list + ": unknown finding id '" + id + "' (known: " + names +
                     ")");
  }
  return ids;
}

json diagnosis_json(const diagnose::Diagnosis& d) {
  json findings = json::array();
  for (const diagnose::Finding& f : d.findings) {
    json evidence = json::array();
    for (const auto& [what, value] : f.evidence) evidence.push_back(json::array({what, value}));
    findings.push_back({{"id", f.id},
                        {"title", f.title},
                        {"device", f.device},
                        {"bytes", f.bytes},
                        {"time_ns", f.time_ns},
                        {"site", f.site},
                        {"stack", f.stack},
                        {"evidence", evidence},
                        {"fix", f.fix},
                        {"severity", diagnose::severity_name(f.severity)},
                        {"share", f.share}});
  }
  json skipped = json::array();
  for (const diagnose::SkippedDetector& s : d.skipped)
    skipped.push_back({{"id", s.id}, {"reason", s.reason}});
  return {{"findings", findings}, {"skipped", skipped}, {"minor_hidden", d.minor_hidden}};
}

void print_diagnosis(const an::Trace& t, const std::string& name, const diagnose::Diagnosis& d,
                     const std::vector<std::string>& after_fix) {
  fmt::print("{}: {} finding{}\n", name, d.findings.size(), d.findings.size() == 1 ? "" : "s");
  print_estimate_label(t);
  for (size_t i = 0; i < d.findings.size(); ++i) {
    const diagnose::Finding& f = d.findings[i];
    std::string stake = f.bytes ? an::format_bytes(f.bytes)
                                : (f.time_ns ? an::format_duration(f.time_ns) + " waited" : "");
    fmt::print("\n{}. [{}] {}{}\n", i + 1, f.id, f.title,
               f.device.empty() ? "" : " (" + f.device + ")");
    fmt::print("   severity: {}{}\n", diagnose::severity_name(f.severity),
               stake.empty() ? ""
                             : fmt::format(" ({} at stake, {:.1f}% of the {})", stake,
                                           100.0 * f.share, f.bytes ? "device's peak" : "run"));
    // A finding about the whole run (allocator-settings) has no site even with stacks.
    fmt::print("   site: {}\n", !f.site.empty() ? f.site
                                : t.stack_depth() == 0
                                    ? std::string("(no stack recorded)")
                                    : std::string("(none: the finding is about the whole run)"));
    for (const auto& [what, value] : f.evidence) fmt::print("   {}: {}\n", what, value);
    fmt::print("   fix: {}\n", f.fix);
    if (i < after_fix.size() && !after_fix[i].empty()) fmt::print("   {}\n", after_fix[i]);
  }
  if (d.minor_hidden)
    fmt::print("\n{} minor finding{} not shown (--all shows {})\n", d.minor_hidden,
               d.minor_hidden == 1 ? "" : "s", d.minor_hidden == 1 ? "it" : "them");
  if (!d.skipped.empty()) {
    fmt::print("\nskipped:\n");
    for (const diagnose::SkippedDetector& s : d.skipped) fmt::print("  {}: {}\n", s.id, s.reason);
  }
}

int run_diagnose(const DiagnoseArgs& a) {
  if (!a.command.empty()) return run_diagnose_verify(a);
  const std::set<std::string> only = parse_finding_ids("--only", a.only);
  an::Trace t = open_trace(a.file);
  diagnose::Diagnosis d;
  {
    Progress p("diagnosing " + a.file);
    d = diagnose::diagnose(t, only, a.all);
  }
  if (a.json) {
    json j = diagnosis_json(d);
    j["json_version"] = an::kJsonSchemaVersion;
    j["path"] = a.file;
    label_estimate(j, t);
    std::cout << json_text(j) << '\n';
    return kExitOk;
  }
  print_diagnosis(t, a.file, d, {});
  return kExitOk;
}

}  // namespace tidemark::cli
