// The Python side of `tidemark record` (record_python.h).
#include "cli/record_python.h"

#include <fmt/core.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/common.h"
#include "cli/hook_protocol.h"
#include "profiler/analysis/output_file.h"
#include "profiler/record/recorder.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::cli {

namespace fs = std::filesystem;

bool is_python_command(const std::vector<std::string>& command) {
  if (command.empty()) return false;
  const std::string name = fs::path(command.front()).filename().string();
  static const std::regex interpreter(
      R"((python|pypy)[0-9.]*(-dbg)?|torchrun|accelerate|deepspeed|ipython3?)");
  if (std::regex_match(name, interpreter)) return true;
  if (name.size() > 3 && name.ends_with(".py")) return true;
  // A script with a #! line naming python (found on PATH as execvp would find it).
  std::string path = command.front();
  if (path.find('/') == std::string::npos) {
    const char* p = std::getenv("PATH");
    std::string dirs = p ? p : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      size_t colon = dirs.find(':', start);
      if (colon == std::string::npos) colon = dirs.size();
      const fs::path candidate = fs::path(dirs.substr(start, colon - start)) / path;
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec)) {
        path = candidate.string();
        break;
      }
      start = colon + 1;
    }
  }
  std::ifstream in(path, std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first) || !first.starts_with("#!")) return false;
  return first.find("python") != std::string::npos;
}

std::string python_hook_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path() / "python");
    candidates.push_back(exe.parent_path() / ".." / "share" / "tidemark" / "python");
  }
#ifdef TIDEMARK_PYTHON_HOOK_INSTALL_DIR
  candidates.push_back(TIDEMARK_PYTHON_HOOK_INSTALL_DIR);
#endif
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c / "sitecustomize.py", ec))
      return fs::weakly_canonical(c, ec).string();
  return {};
}

PythonHook::PythonHook(const RecordArgs& a)
    : args_(a), hook_(python_hook_dir()), folder_("tidemark-python", "record") {
  if (!hook_.empty()) dir_ = folder_.path();
}

std::vector<std::string> PythonHook::environment(bool nvtx) const {
  if (hook_.empty()) return {};
  const char* old = std::getenv("PYTHONPATH");
  std::vector<std::string> env = {
      "PYTHONPATH=" + hook_ + (old && *old ? ":" + std::string(old) : std::string()),
      hook::assign(hook::kDir, dir_),
      hook::assign(hook::kMaxEntries, std::to_string(args_.max_entries)),
      hook::assign(hook::kStacks, args_.python_stacks),
  };
  if (!args_.step_on.empty()) env.push_back(hook::assign(hook::kStepOn, args_.step_on));
  if (nvtx) env.push_back(hook::assign(hook::kNvtx, "1"));
  env.insert(env.end(), args_.environment.begin(), args_.environment.end());
  return env;
}

namespace {

struct Status {
  int64_t pid = 0;
  bool torch = false, cuda = false, recording = false, oom = false;
  uint64_t entries = 0, max_entries = 0, steps = 0;
  std::string error;
};

std::vector<Status> read_statuses(const std::string& dir) {
  std::vector<Status> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(hook::kStatusPrefix) || !name.ends_with(".json")) continue;
    std::ifstream in(e.path());
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    Status s;
    s.pid = j.value("pid", int64_t{0});
    s.torch = j.value("torch", false);
    s.cuda = j.value("cuda", false);
    s.recording = j.value("recording", false);
    s.oom = j.value("oom", false);
    s.entries = j.value("entries", uint64_t{0});
    s.max_entries = j.value("max_entries", uint64_t{0});
    s.steps = j.value("steps", uint64_t{0});
    if (j.contains("error") && j["error"].is_string()) s.error = j["error"].get<std::string>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

int PythonHook::finish(const std::string& output, int code, int64_t started_unix_ns,
                       int64_t root_pid) const {
  const std::string program = args_.command.front();
  std::vector<std::string> ranked, by_pid;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".pickle")) continue;
    (name.starts_with(hook::kRankSnapshotPrefix) ? ranked : by_pid).push_back(e.path().string());
  }
  std::sort(ranked.begin(), ranked.end());
  std::sort(by_pid.begin(), by_pid.end());
  const std::vector<Status> statuses = read_statuses(dir_);
  for (const Status& s : statuses)
    if (!s.error.empty())
      fmt::print(stderr, "tidemark: the Python hook in process {}: {}\n", s.pid, s.error);

  // The CUDA injection's own trace of the run, if it wrote one: the snapshot lines up with it.
  bool injected = false;
  if (store::is_trace_file(output)) {
    try {
      injected = store::TraceReader::open(output, store::TraceReader::Require::upgradable)
                     .meta()
                     .start_unix_ns >= started_unix_ns;
    } catch (const std::exception&) {
    }
  }

  if (ranked.empty() && by_pid.empty()) {
    if (injected) return -1;  // the injection's trace alone: the caller finishes it
    const bool any_torch =
        std::any_of(statuses.begin(), statuses.end(), [](const Status& s) { return s.torch; });
    const bool any_cuda =
        std::any_of(statuses.begin(), statuses.end(), [](const Status& s) { return s.cuda; });
    if (statuses.empty() && code > 128)
      fmt::print(stderr,
                 "tidemark: {} was ended by signal {} before Tidemark's Python hook wrote "
                 "anything: nothing recorded\n",
                 program, code - 128);
    else if (statuses.empty())
      fmt::print(stderr,
                 "tidemark: {} ran, but Tidemark's Python hook left no word from it: the process "
                 "ended without running its exit handlers (os._exit), or Python never ran the "
                 "hook (python -S or -I skips sitecustomize; a program that is not Python): "
                 "nothing recorded\n",
                 program);
    else if (!any_torch)
      fmt::print(
          stderr,
          "tidemark: {} ran Python without importing torch: no PyTorch memory to record, nothing "
          "recorded "
          "(tensorlib programs record host and device memory themselves: docs/recording.md)\n",
          program);
    else if (!any_cuda)
      fmt::print(stderr,
                 "tidemark: {} ran PyTorch without CUDA (torch.cuda.is_available() was False): no "
                 "CUDA memory was "
                 "used, so none was recorded. PyTorch's CPU memory is not recorded; to see where "
                 "it goes, run the "
                 "program on a GPU, or use torch.profiler's memory timeline (docs/recording.md)\n",
                 program);
    else
      fmt::print(
          stderr,
          "tidemark: {} imported torch with CUDA but never initialised it: no CUDA memory used, "
          "nothing recorded\n",
          program);
    return code != 0 ? code : kExitCheckFailed;
  }

  std::vector<std::string> import;
  std::string onto;
  if (ranked.size() > 1) {
    import = ranked;
    if (injected)
      fmt::print(
          stderr,
          "tidemark: the CUDA trace of the run is left out: the ranks' snapshots are merged, and "
          "a merge does not line them up with it\n");
  } else {
    // One rank, or processes without ranks: the snapshot of the process record started (its
    // pid), else the first; the others are kept beside the output.
    std::string root = ranked.empty() ? std::string() : ranked.front();
    if (root.empty()) {
      const std::string mine = hook::kPidSnapshotPrefix + std::to_string(root_pid) + ".pickle";
      auto it = std::find_if(by_pid.begin(), by_pid.end(),
                             [&](const std::string& p) { return fs::path(p).filename() == mine; });
      root = it != by_pid.end() ? *it : by_pid.front();
    }
    import = {root};
    for (const std::string& p : by_pid) {
      if (p == root) continue;
      const fs::path kept =
          fs::path(output).parent_path() /
          (fs::path(output).stem().string() + "-" + fs::path(p).filename().string());
      // A name record chose, in the output's directory, which others may write: a link
      // planted there is replaced, never written through (Note [Output files]).
      try {
        analysis::OutputFile out(kept.string(), {p}, analysis::OutputFile::Name::chosen);
        std::ifstream in(p, std::ios::binary);
        out.stream() << in.rdbuf();
        out.commit();
        fmt::print(stderr,
                   "tidemark: another process of the run (not a rank) wrote a snapshot too: kept "
                   "as {}\n",
                   kept.string());
      } catch (const analysis::OutputError& e) {
        fmt::print(stderr,
                   "tidemark: another process of the run (not a rank) wrote a snapshot too, not "
                   "kept: {}\n",
                   e.what());
      }
    }
    if (injected) {
      record::finalize_trace(output);
      onto = (fs::path(dir_) / "cuda.db").string();
      fs::rename(output, onto, ec);
      if (ec) {
        fs::copy_file(output, onto, fs::copy_options::overwrite_existing, ec);
        fs::remove(output, ec);
      }
      store::remove_trace_sidecars(output);
    }
  }
  // The one rank's own number (RANK as the process had it; not a number: none).
  std::optional<int64_t> rank;
  if (import.size() == 1 && !ranked.empty()) {
    const std::string digits = fs::path(import.front())
                                   .stem()
                                   .string()
                                   .substr(std::string(hook::kRankSnapshotPrefix).size());
    if (!digits.empty() && digits.size() < 10 &&
        std::all_of(digits.begin(), digits.end(), ::isdigit))
      rank = std::stoll(digits);
  }
  run_import(import, output, onto, 0, rank);
  for (const Status& s : statuses) {
    if (s.max_entries && s.entries >= s.max_entries)
      fmt::print(stderr,
                 "tidemark: process {}: the allocator history filled its {} entries: the trace "
                 "holds the last {} "
                 "(--max-entries keeps more)\n",
                 s.pid, s.max_entries, s.max_entries);
    if (s.oom)
      fmt::print(
          stderr,
          "tidemark: process {} ran out of CUDA memory (its snapshot was first written then)\n",
          s.pid);
  }
  if (!args_.quiet) print_summary(output);
  return code;
}

}  // namespace tidemark::cli
