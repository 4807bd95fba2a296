// tidemark diagnose --verify -- python train.py: the program estimated (estimate.cpp), its
// trace diagnosed, and each finding's fix measured by running the program again with the fix
// applied at run time (Note [Fixes at run time] in python/hook/tidemark_hook/estimate/fixes.py)
// -- the saving a fix brings, not a detector's arithmetic. A fix that rewrites the program
// (checkpointing, fused attention, a warm-up under no_grad) cannot be applied from outside: its
// finding says so, and that its saving is the detector's estimate.
#include <fmt/core.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace {

namespace an = analysis;
using nlohmann::json;

// How a finding's fix is applied at run time, and which peak it lowers.
struct RunTimeFix {
  std::string fix;         // the hook's fix (fixes.py), or empty
  std::string alloc_conf;  // or PYTORCH_CUDA_ALLOC_CONF for the run
  std::string what;        // the fix in the user's words
  bool reserved = false;   // measured on the reserved peak (an allocator setting)
};

// The fix of a finding that can be applied from outside the program, or why not.
std::optional<RunTimeFix> run_time_fix(const diagnose::Finding& f, std::string& why) {
  auto has_evidence = [&](std::string_view what) {
    for (const auto& [w, v] : f.evidence)
      if (w.starts_with(what)) return true;
    return false;
  };
  if (f.id == "stale-grads")
    return RunTimeFix{"grads-to-none", "", "zero_grad(set_to_none=True) at the start of each step",
                      false};
  // torch.optim's own step (its fix names foreach or fused); a hand-written optimizer's fix
  // rewrites it.
  if (f.id == "optimizer-peak" && f.fix.find("foreach=False") != std::string::npos)
    return RunTimeFix{"foreach-off", "", "the optimizer with foreach=False", false};
  if (f.id == "grad-in-eval")
    return RunTimeFix{"no-grad", "", "the forward under torch.no_grad()", false};
  if (f.id == "autocast-cache" && has_evidence("copies made before the peak's step"))
    return RunTimeFix{"autocast-per-step", "",
                      "autocast's cache cleared at each step, as a region around the forward "
                      "alone does",
                      false};
  if (f.id == "fragmentation")
    return RunTimeFix{"", "expandable_segments:True",
                      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", true};
  if (f.id == "optimizer-peak")
    why = "the fix (updates in place) rewrites the program's own optimizer";
  else if (f.id == "allocator-settings")
    why = "measured already, by replaying the trace under the setting (its evidence)";
  else if (f.id == "autocast-cache")
    why = "the fix (16-bit weights with a float32 copy in the optimizer) rewrites the program";
  else if (f.id == "activation-peak")
    why = "checkpointing rewrites the model; the saving above is the detector's estimate";
  else if (f.id == "attention-peak")
    why = "fused attention rewrites the model; the saving above is the detector's estimate";
  else if (f.id == "kept-graph")
    why =
        "the fix (the warm-up under no_grad, or del its output) rewrites the program; the "
        "saving above is what the graph holds at the peak";
  else
    why = "no fix of it can be applied from outside the program";
  return std::nullopt;
}

struct Measured {
  bool ok = false;
  int64_t before = 0, after = 0;
  std::string why;
};

std::string measured_line(const RunTimeFix& fix, const Measured& m) {
  if (!m.ok) return "not measurable: " + m.why;
  const int64_t saved = m.before - m.after;
  return fmt::format("measured: {} {} (peak {} {} -> {}) with {}", saved >= 0 ? "saves" : "costs",
                     an::format_bytes(saved >= 0 ? saved : -saved),
                     fix.reserved ? "reserved" : "allocated", an::format_bytes(m.before),
                     an::format_bytes(m.after), fix.what);
}

}  // namespace

int run_diagnose_verify(const DiagnoseArgs& a) {
  check_estimate_command("diagnose --verify", a.command);
  const std::set<std::string> only = parse_finding_ids("--only", a.only);
  EstimateArgs est;
  est.json = a.json;
  const std::string output = a.file.empty() ? default_estimate_output(a.command) : a.file;
  const EstimateOutcome base = estimate_once(est, a.command, output, a.json);
  if (!base.has_device)
    throw UsageError("diagnose --verify: " + a.command.back() + " wrote no estimate (exit status " +
                     std::to_string(base.code) +
                     "): it never put a tensor on the GPU, or failed before");
  an::Trace t = open_trace(base.trace);
  diagnose::Diagnosis d;
  {
    Progress p("diagnosing " + base.trace);
    d = diagnose::diagnose(t, only, a.all);
  }
  // Each fix runs once, whichever findings ask for it.
  PrivateDir scratch("tidemark-verify", "diagnose --verify");
  std::map<std::string, Measured> runs;
  auto measure = [&](const RunTimeFix& fix) {
    const std::string key = fix.fix + "|" + fix.alloc_conf;
    if (auto it = runs.find(key); it != runs.end()) return it->second;
    EstimateArgs again = est;
    again.fix = fix.fix;
    if (!fix.alloc_conf.empty()) again.alloc_conf = fix.alloc_conf;
    fmt::print(stderr, "tidemark: running {} again with {}\n", a.command.back(), fix.what);
    const EstimateOutcome o = estimate_once(
        again, a.command, scratch.file("fixed-" + std::to_string(runs.size()) + ".db"), true);
    Measured m;
    m.before = fix.reserved ? base.device.peak_reserved_bytes : base.device.peak_allocated_bytes;
    if (o.code != 0 || !o.has_device) {
      m.why =
          fmt::format("the program did not take the fix ({}: exit status {})", fix.what, o.code);
    } else {
      m.ok = true;
      m.after = fix.reserved ? o.device.peak_reserved_bytes : o.device.peak_allocated_bytes;
    }
    return runs[key] = m;
  };
  std::vector<std::string> lines;
  json verified = json::array();
  for (const diagnose::Finding& f : d.findings) {
    std::string why;
    const std::optional<RunTimeFix> fix = run_time_fix(f, why);
    json v = {{"id", f.id}, {"device", f.device}};
    if (!fix) {
      lines.push_back("not measurable: " + why);
      v.update({{"measured", false}, {"why", why}});
    } else {
      const Measured m = measure(*fix);
      lines.push_back(measured_line(*fix, m));
      v.update({{"measured", m.ok}, {"fix", fix->what}});
      if (m.ok)
        v.update({{"curve", fix->reserved ? "reserved" : "allocated"},
                  {"peak_before_bytes", m.before},
                  {"peak_after_bytes", m.after},
                  {"saving_bytes", m.before - m.after}});
      else
        v["why"] = m.why;
    }
    verified.push_back(std::move(v));
  }
  if (a.json) {
    json j = diagnosis_json(d);
    j["json_version"] = an::kJsonSchemaVersion;
    j["path"] = base.trace;
    j["verified"] = std::move(verified);
    label_estimate(j, t);
    std::cout << json_text(j) << '\n';
    return kExitOk;
  }
  print_diagnosis(t, base.trace, d, lines);
  return kExitOk;
}

}  // namespace tidemark::cli
