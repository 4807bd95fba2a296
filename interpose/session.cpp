#include "interpose/session.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "profiler/record/output_path.h"
#include "profiler/record/recorder.h"

namespace tidemark::interpose {

namespace {

std::mutex g_mu;
bool g_tried = false;
bool g_running = false;
std::string g_path;
std::atomic<void (*)()> g_before_stop{nullptr};
std::atomic<int> g_stack_depth{0};

// Another recorder in this process (a program linked with Tidemark::autostart records itself)
// already holds the file open: two writers would clobber each other.
bool open_in_this_process(const std::string& path) {
  std::error_code ec;
  std::filesystem::path want = std::filesystem::weakly_canonical(path, ec);
  if (ec) return false;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    std::filesystem::path target = std::filesystem::read_symlink(fd.path(), ec2);
    if (!ec2 && target == want) return true;
  }
  return false;
}

// The file name as a pattern, which record::start expands (Note [Output patterns] in
// profiler/record/output_path.h).
std::string choose_pattern() {
  const char* out = std::getenv("TIDEMARK_OUTPUT");
  std::string path = out && *out ? out : "tidemark-%p.db";
  const char* root = std::getenv("TIDEMARK_ROOT_PID");
  const std::string pid = std::to_string(getpid());
  if (root && *root && pid != root && !record::has_pattern(path, 'p') &&
      !record::has_pattern(path, 'r')) {
    // A child of the recorded program: its own file, next to the parent's. (A name with %p or
    // %r is each process's own already: the ranks of an MPI run started by the program.)
    std::filesystem::path p(path);
    path = (p.parent_path() / (p.stem().string() + "-" + pid + p.extension().string())).string();
  }
  return path;
}

void stop_at_exit() {
  if (auto hook = g_before_stop.load()) hook();
  try {
    record::stop();
  } catch (...) {
  }
}

}  // namespace

void warn(const std::string& message) noexcept {
  try {
    std::fprintf(stderr, "tidemark: %s\n", message.c_str());
  } catch (...) {
  }
}

bool ensure_recording() noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_tried) return g_running;
    g_tried = true;
    record::Options options = record::options_from_env();
    options.path = choose_pattern();
    const std::string path =
        record::expand_output_path(options.path, getpid(), record::rank_from_env()).path;
    const char* root = std::getenv("TIDEMARK_ROOT_PID");
    if (root && *root && std::to_string(getpid()) != root) options.finalize = true;
    if (open_in_this_process(path)) {
      warn("injection off: " + path +
           " is already being recorded by the program itself (Tidemark::autostart)");
      return false;
    }
    record::start(options);
    g_path = path;
    g_stack_depth.store(options.stack_depth);
    g_running = true;
    std::atexit(stop_at_exit);
    return true;
  } catch (const std::exception& e) {
    std::string what = e.what();
    warn("injection off, the program runs untraced: " +
         (what.rfind("tidemark: ", 0) == 0 ? what.substr(10) : what));
  } catch (...) {
    warn("injection off, the program runs untraced");
  }
  return false;
}

std::string trace_path() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_path;
}

int stack_depth() noexcept {
  return g_stack_depth.load();
}

void set_before_stop(void (*hook)()) noexcept {
  g_before_stop.store(hook);
}

}  // namespace tidemark::interpose
