// `tidemark estimate -- python train.py` (docs/estimate.md): the program runs with real PyTorch
// on the CPU, its GPU faked by the in-process hook (python/hook/tidemark_hook/estimate), and is
// recorded as `record` records it -- the same hook, the same import -- into a trace labelled
// estimated (meta `estimated`). This file adds what only an estimate has: the card, the fit,
// what was emulated and what could not be, and the sweep.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/hook_protocol.h"
#include "cli/record_python.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/memory.h"
#include "profiler/naming/units.h"
#include "profiler/store/trace_file.h"

namespace tidemark::cli {

namespace {

namespace an = tidemark::analysis;
using nlohmann::json;

// The estimate's allocator library (profiler/estimate), as the injection library is found.
std::string estimate_library() {
  return find_library_beside(TIDEMARK_ESTIMATE_NAME, "profiler/estimate", TIDEMARK_LIBDIR,
                             TIDEMARK_ESTIMATE_INSTALL_PATH, TIDEMARK_ESTIMATE_BUILD_PATH);
}

json outcome_json(const EstimateOutcome& o) {
  json j = {{"trace", o.trace.empty() ? json(nullptr) : json(o.trace)},
            {"exit_code", o.code},
            {"estimated", o.estimated},
            {"sound", !o.unsound()}};
  if (o.has_device) {
    j["device"] = o.device.device;
    j["capacity_bytes"] = o.capacity;
    j["peak_allocated_bytes"] = o.device.peak_allocated_bytes;
    j["peak_requested_bytes"] = o.device.peak_requested_bytes;
    j["peak_reserved_bytes"] = o.device.peak_reserved_bytes;
    j["oom_count"] = o.device.oom_count;
    j["fits"] = o.fits();
  }
  return j;
}

void print_outcome(const EstimateOutcome& o) {
  if (!o.has_device) return;
  fmt::print(stderr, "\n{}\n", an::estimate_label(o.account));
  fmt::print(stderr, "  peak allocated {:>12}   peak requested {}\n",
             an::format_bytes(o.device.peak_allocated_bytes),
             an::format_bytes(o.device.peak_requested_bytes));
  fmt::print(stderr, "  peak reserved  {:>12}   on a device of {}: {}\n",
             an::format_bytes(o.device.peak_reserved_bytes),
             an::format_bytes(static_cast<int64_t>(o.capacity)),
             o.fits()
                 ? "fits"
                 : fmt::format("OUT OF MEMORY ({} allocation{} failed; tidemark diagnose {} "
                               "shows what was live)",
                               o.device.oom_count, o.device.oom_count == 1 ? "" : "s", o.trace));
  const json& e = o.estimated;
  if (!e.is_object()) return;
  for (const json& m : e.value("emulated", json::array()))
    fmt::print(stderr, "  emulated: {}: {} (x{})\n", m.value("what", ""), m.value("detail", ""),
               m.value("count", 0));
  for (const json& m : e.value("not_modelled", json::array()))
    fmt::print(stderr, "  not modelled: {} (x{})\n", m.value("what", ""), m.value("count", 0));
  const json values = e.value("values_read", json::array());
  if (!values.empty()) {
    fmt::print(stderr,
               "  the program read {} value{} of GPU tensors, which the estimate has not (zeros "
               "instead), first at {}\n",
               values.size(), values.size() == 1 ? "" : "s", values[0].value("line", "?"));
  }
  for (const json& m : e.value("not_estimated", json::array()))
    fmt::print(stderr, "  NOT ESTIMATED: {} at {}: {}\n", m.value("op", ""), m.value("line", ""),
               m.value("error", ""));
  if (o.unsound())
    fmt::print(stderr,
               "  the estimate is unsound: an operator above has no meta kernel or needs data "
               "(docs/estimate.md, \"What it cannot see\")\n");
}

// The exit status: the program's; 1 when it exited 0 but the estimate is unsound or it wrote
// no trace.
int status_of(const EstimateOutcome& o) {
  if (o.code != 0) return o.code;
  return o.trace.empty() || o.unsound() ? kExitCheckFailed : kExitOk;
}

int run_sweep(const EstimateArgs& a) {
  const size_t eq = a.sweep.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == a.sweep.size())
    throw UsageError("--sweep " + a.sweep +
                     ": expected NAME=V1,V2,... (each {NAME} in the "
                     "command is replaced by each value in turn)");
  const std::string name = a.sweep.substr(0, eq), token = "{" + name + "}";
  std::vector<std::string> values;
  for (size_t at = eq + 1; at <= a.sweep.size();) {
    size_t comma = a.sweep.find(',', at);
    if (comma == std::string::npos) comma = a.sweep.size();
    if (comma > at) values.push_back(a.sweep.substr(at, comma - at));
    at = comma + 1;
  }
  if (values.empty()) throw UsageError("--sweep " + a.sweep + ": no values");
  bool named = false;
  for (const std::string& arg : a.command) named = named || arg.find(token) != std::string::npos;
  if (!named)
    throw UsageError("--sweep " + a.sweep + ": the command has no " + token + " to replace");
  auto replaced = [&](std::string s, const std::string& v) {
    for (size_t at; (at = s.find(token)) != std::string::npos;) s.replace(at, token.size(), v);
    return s;
  };
  std::vector<EstimateOutcome> outcomes;
  for (const std::string& v : values) {
    std::vector<std::string> command;
    for (const std::string& arg : a.command) command.push_back(replaced(arg, v));
    std::string output = a.output.empty() ? "tidemark-estimate-" + name + "-" + v + ".db"
                         : a.output.find(token) != std::string::npos
                             ? replaced(a.output, v)
                             : std::filesystem::path(a.output).replace_extension().string() + "-" +
                                   name + "-" + v + ".db";
    fmt::print(stderr, "== {}={}\n", name, v);
    outcomes.push_back(estimate_once(a, command, output, true));
  }
  std::optional<size_t> largest;
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (outcomes[i].fits() && outcomes[i].code == 0) largest = i;
  if (a.json) {
    json runs = json::array();
    for (size_t i = 0; i < values.size(); ++i) {
      json r = outcome_json(outcomes[i]);
      r["value"] = values[i];
      runs.push_back(std::move(r));
    }
    fmt::print(
        "{}\n",
        json_text({{"json_version", an::kJsonSchemaVersion},
                   {"estimated", true},
                   {"sweep", name},
                   {"runs", std::move(runs)},
                   {"largest_that_fits", largest ? json(values[*largest]) : json(nullptr)}}));
  } else {
    fmt::print("estimated, no GPU ran: {} swept over {}\n", name, a.sweep);
    fmt::print("{:>12}  {:>14}  {:>14}  {}\n", name, "peak allocated", "peak reserved", "fits");
    for (size_t i = 0; i < values.size(); ++i) {
      const EstimateOutcome& o = outcomes[i];
      if (!o.has_device) {
        fmt::print("{:>12}  {:>14}  {:>14}  {}\n", values[i], "-", "-",
                   fmt::format("no estimate (exit {})", o.code));
        continue;
      }
      fmt::print("{:>12}  {:>14}  {:>14}  {}\n", values[i],
                 an::format_bytes(o.device.peak_allocated_bytes),
                 an::format_bytes(o.device.peak_reserved_bytes),
                 o.fits() ? (o.unsound() ? "yes (unsound)" : "yes") : "NO: out of memory");
    }
    fmt::print("largest that fits: {}\n", largest ? name + "=" + values[*largest] : "none");
  }
  return largest ? kExitOk : kExitCheckFailed;
}

}  // namespace

bool EstimateOutcome::unsound() const {
  return estimated.is_object() && estimated.contains("not_estimated") &&
         !estimated["not_estimated"].empty();
}

// Runs `command` once under the estimate into `output`, with the program's standard output
// (and the import's lines) on stderr when `json_out` keeps stdout for the JSON.
EstimateOutcome estimate_once(const EstimateArgs& a, const std::vector<std::string>& command,
                              const std::string& output, bool json_out) {
  RecordArgs rec;
  rec.output = output;
  rec.no_cuda = true;  // nothing runs on a GPU: no CUDA injection
  rec.command = command;
  rec.quiet = true;
  rec.program_stdout_to_stderr = json_out;
  rec.max_entries = uint64_t{1} << 40;  // the estimate keeps the whole history anyway
  rec.environment = {hook::assign(hook::kMode, hook::kModeEstimate),
                     hook::assign(hook::kEstimateLibrary, estimate_library())};
  if (!a.gpu.empty()) rec.environment.push_back(hook::assign(hook::kEstimateGpu, a.gpu));
  if (!a.device_memory.empty())
    rec.environment.push_back(
        hook::assign(hook::kEstimateCapacity,
                     std::to_string(parse_capacity_option("--device-memory", a.device_memory))));
  if (a.alloc_conf) rec.environment.push_back("PYTORCH_CUDA_ALLOC_CONF=" + *a.alloc_conf);
  if (!a.fix.empty()) rec.environment.push_back(hook::assign(hook::kEstimateFix, a.fix));

  EstimateOutcome o;
  // The import prints its line on stdout: with --json it goes to stderr, as the program's does.
  std::fflush(stdout);
  const int saved = json_out ? ::dup(STDOUT_FILENO) : -1;
  if (saved >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  try {
    o.code = run_record(rec);
  } catch (...) {
    std::fflush(stdout);
    if (saved >= 0) ::dup2(saved, STDOUT_FILENO), ::close(saved);
    throw;
  }
  std::fflush(stdout);
  if (saved >= 0) ::dup2(saved, STDOUT_FILENO), ::close(saved);

  if (output.empty() || !store::is_trace_file(output)) return o;
  o.trace = output;
  const an::Trace t = open_trace(output);
  const an::Summary s = an::summarize(t, {});
  o.account = t.estimated();
  json labelled;
  label_estimate(labelled, t);
  o.estimated = std::move(labelled["estimated"]);
  for (const an::DeviceSummary& d : s.devices)
    if (d.device.starts_with("cuda")) o.device = d, o.has_device = true;
  if (o.estimated.is_object() && o.estimated.contains("capacity") &&
      o.estimated["capacity"].is_number_unsigned())
    o.capacity = o.estimated["capacity"].get<uint64_t>();
  return o;
}

void check_estimate_command(const std::string& command_name,
                            const std::vector<std::string>& command) {
  if (command.empty())
    throw UsageError(command_name + ": no command given; usage: tidemark " + command_name +
                     " [OPTIONS] -- python train.py [ARGS...]");
  if (!is_python_command(command))
    throw UsageError(command_name + ": " + command.front() +
                     " is not a Python program; the estimate runs PyTorch scripts (tidemark " +
                     command_name + " -- python train.py ...)");
  if (python_hook_dir().empty())
    throw UsageError(command_name +
                     ": the Python hook (sitecustomize.py) was not found next to tidemark");
  if (estimate_library().empty())
    throw UsageError(command_name + ": the allocator library " +
                     std::string(TIDEMARK_ESTIMATE_NAME) + " was not found next to tidemark");
}

std::string default_estimate_output(const std::vector<std::string>& command) {
  std::string program;
  for (const std::string& arg : command)
    if (arg.ends_with(".py")) program = std::filesystem::path(arg).stem().string();
  return "tidemark-estimate-" + (program.empty() ? std::string("python") : program) + "-" +
         std::to_string(::getpid()) + ".db";
}

int run_estimate(const EstimateArgs& a) {
  check_estimate_command("estimate", a.command);
  if (!a.sweep.empty()) return run_sweep(a);
  const std::string output = a.output.empty() ? default_estimate_output(a.command) : a.output;
  const EstimateOutcome o = estimate_once(a, a.command, output, a.json);
  if (a.json) {
    json j = outcome_json(o);
    j["json_version"] = an::kJsonSchemaVersion;
    fmt::print("{}\n", json_text(j));
  } else {
    print_outcome(o);
    if (!o.trace.empty()) fmt::print(stderr, "trace: {} (every command reads it)\n", o.trace);
  }
  return status_of(o);
}

}  // namespace tidemark::cli
