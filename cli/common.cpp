#include "cli/common.h"
#include <filesystem>

#include <fmt/core.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "profiler/analysis/memory.h"
#include "profiler/importers/import_error.h"
#include "profiler/importers/temporary_import.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

Progress::Progress(const std::string& what) {
  if (!what.empty() && ::isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "tidemark: %s...", what.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
}

Progress::~Progress() {
  if (shown_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

PrivateDir::PrivateDir(std::string prefix, std::string who)
    : prefix_(std::move(prefix)), who_(std::move(who)) {}

PrivateDir::~PrivateDir() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

const std::string& PrivateDir::path() {
  if (dir_.empty()) {
    const std::filesystem::path tmp = std::filesystem::temp_directory_path();
    std::string templ = (tmp / (prefix_ + "-XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr)
      throw UsageError(who_ + ": cannot make a private directory in " + tmp.string());
    dir_ = templ;
  }
  return dir_;
}

std::string PrivateDir::file(const std::string& name) {
  return (std::filesystem::path(path()) / name).string();
}

namespace {
Frames g_frames = Frames::user;
bool g_categories = false;    // this command groups by custom categories when it has rules
std::string g_category_file;  // --categories; empty: found beside the trace or here
}  // namespace

void set_frames(Frames frames) {
  g_frames = frames;
}

void use_category_rules(const std::string& file) {
  g_categories = true;
  g_category_file = file;
}

// Note [Category rules] (profiler/analysis/category_rules.h): --categories FILE, else
// tidemark-categories.json (or .yaml) beside the trace, if the user owns it (CategoryRules::find).
std::shared_ptr<analysis::CategoryRules> category_rules_for(const std::string& trace_path) {
  if (!g_categories) return nullptr;
  try {
    return analysis::CategoryRules::find(trace_path, g_category_file);
  } catch (const analysis::CategoryRulesError& e) {
    throw UsageError(std::string("--categories: ") + e.what());
  }
}

namespace {
// A trace refused for not being finalized while its recording still runs: what to do is to
// wait (or watch it), not to finalize, which refuses a live recording. Empty otherwise.
std::string live_recording(const std::string& path) {
  try {
    const auto r = store::TraceReader::open(path, store::TraceReader::Require::raw);
    if (r.finalized()) return {};
    const store::TraceMeta m = r.meta();
    const RecordingProcesses p = recording_processes(m.host, m.pid, m.finalizer_pid);
    if (p.alive_pid == 0) return {};
    return fmt::format(
        "{}: still being recorded: {}; the finalized tables this command reads exist once it "
        "has, and `tidemark watch {}` follows the recording live",
        path, p.who(), path);
  } catch (const store::StoreError&) {
    return {};
  }
}
}  // namespace

std::string trace_file_for(const std::string& path) {
  if (!importers::starts_as_pickle(path)) return path;
  Progress p("importing " + path);
  try {
    return importers::imported_trace(path);
  } catch (const importers::ImportError& e) {
    throw UsageError(e.what());
  }
}

analysis::Trace open_trace(const std::string& given, bool require_finalized) {
  const std::string path = trace_file_for(given);
  Progress p("reading " + given);
  analysis::Trace t = [&] {
    try {
      return analysis::Trace::open(path, require_finalized ? store::TraceReader::Require::finalized
                                                           : store::TraceReader::Require::raw);
    } catch (const store::StoreError&) {
      if (std::string live = require_finalized ? live_recording(path) : std::string();
          !live.empty())
        throw UsageError(live);
      throw;
    }
  }();
  if (path != given) t.set_shown_path(given);
  t.set_frames(g_frames);
  t.set_category_rules(category_rules_for(given));
  return t;
}

std::vector<analysis::DeviceRef> select_devices(const analysis::Trace& trace,
                                                const std::string& device_spec) {
  if (device_spec.empty()) return trace.devices();
  try {
    return {trace.device(device_spec)};
  } catch (const std::invalid_argument& e) {
    throw UsageError(trace.shown_path() + ": " + e.what());
  }
}

analysis::DeviceRef primary_device(const analysis::Trace& trace, const std::string& device_spec) {
  if (!device_spec.empty()) return select_devices(trace, device_spec).front();
  const analysis::DeviceRef* best = analysis::busiest_device(trace);
  if (!best) throw UsageError(trace.shown_path() + ": the trace has no devices (no memory events)");
  return *best;
}

uint64_t parse_time(const analysis::Trace& trace, const std::string& option,
                    const std::string& value) {
  auto ns = analysis::parse_duration_ns(value);
  if (!ns)
    throw UsageError(option + " " + value +
                     ": expected a time since the trace start such as 1.5s, 200ms or 123456ns");
  return trace.origin_ns() + *ns;
}

uint64_t parse_size_option(const std::string& option, const std::string& value) {
  auto bytes = analysis::parse_size(value);
  if (!bytes)
    throw UsageError(option + " " + value + ": expected a size such as 512MiB, 2GiB, 1e9 or 4096");
  return *bytes;
}

uint64_t parse_capacity_option(const std::string& option, const std::string& value) {
  const uint64_t bytes = parse_size_option(option, value);
  if (bytes == 0 || bytes > (uint64_t{1} << 50))
    throw UsageError(option + " " + value +
                     ": expected a device's memory, from 1 byte to 1 PiB (leave it out for "
                     "no limit)");
  return bytes;
}

namespace {
bool process_alive(int64_t pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}
}  // namespace

std::string RecordingProcesses::who() const {
  return finalizer
             ? fmt::format("tidemark record (pid {}) finalizes it when the program ends", alive_pid)
             : fmt::format("the recording process (pid {}) is running", alive_pid);
}

RecordingProcesses recording_processes(const std::string& host, int64_t pid,
                                       int64_t finalizer_pid) {
  char here[256] = {};
  if (pid <= 0 || ::gethostname(here, sizeof here - 1) != 0 || host != here) return {};
  if (process_alive(pid)) return {true, pid, false};
  if (process_alive(finalizer_pid)) return {true, finalizer_pid, true};
  return {true, 0, false};
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool stdout_is_terminal() {
  return ::isatty(STDOUT_FILENO);
}

int terminal_columns() {
  struct winsize w {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 100;
}

std::string markup_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void ensure_open_files(size_t files, const std::string& what) {
  constexpr rlim_t kSlack = 64;  // the standard streams, the output, SQLite's temporaries
  const rlim_t need = static_cast<rlim_t>(files) * kFilesPerTrace + kSlack;
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY ||
      lim.rlim_cur >= need)
    return;
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= need) {
    struct rlimit raised = lim;
    raised.rlim_cur = need;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
  }
  const std::string hard =
      lim.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_max);
  throw UsageError(fmt::format(
      "{}: {} traces at once need about {} open files, more than this process may open (ulimit "
      "-n: {}, hard limit {}); raise the limit (ulimit -n {}), or merge the traces in groups "
      "(tidemark merge -o part-1.db <some of them>) and read the merged traces",
      what, files, need, lim.rlim_cur, hard, need));
}

std::string find_library_beside(const std::string& name, const std::string& build_dir,
                                const std::string& libdir, const std::string& install_path,
                                const std::string& build_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / build_dir / name);
    candidates.push_back(exe.parent_path() / ".." / libdir / name);
  }
  candidates.push_back(install_path);
  candidates.push_back(build_path);
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec).string();
  return {};
}

void label_estimate(nlohmann::json& j, const analysis::Trace& t) {
  nlohmann::json account = nlohmann::json::parse(t.estimated(), nullptr, false);
  j["estimated"] = account.is_discarded() ? nlohmann::json(nullptr) : std::move(account);
}

void print_estimate_label(const analysis::Trace& t) {
  if (!t.estimated().empty()) fmt::print("{}\n", analysis::estimate_label(t.estimated()));
}

}  // namespace tidemark::cli
