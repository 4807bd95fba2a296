// tidemark record: runs a program (fork + exec, no shell) with the environment that makes a
// program linked with Tidemark::autostart record itself, then finalizes the trace here, so a
// child that crashed or was killed still leaves a finalized trace. Unless --no-cuda, the child
// also gets libtidemark_inject.so through CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH, so
// an unmodified CUDA program (PyTorch included) records its CUDA memory, copies, syncs and
// NVTX ranges into the same trace (docs/interpose.md).
#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/record_python.h"
#include "profiler/analysis/memory.h"
#include "profiler/naming/units.h"
#include "profiler/record/output_path.h"
#include "profiler/record/recorder.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/trace_reader.h"

namespace tidemark::cli {

// Prints the summary; returns whether the trace is complete: nothing dropped, and the recording
// closed its file (a writer that failed so hard it could not even store its count of dropped
// events -- a full disk -- leaves only that clean_end 0).
bool print_summary(const std::string& path) {
  analysis::Trace trace = analysis::Trace::open(path);
  const store::TraceReader& r = trace.reader();
  fmt::print(stderr, "tidemark: recorded {} events ({}) in {} to {}\n", r.event_count(),
             analysis::format_dropped(r.dropped_count(), r.loss_counted()),
             analysis::format_duration(trace.duration_ns()), path);
  const std::optional<std::string> writer_error = r.meta_value(store::meta_keys::kWriterError);
  if (r.dropped_count() > 0 || writer_error) {
    // "at least": the final count was not stored (Note [Counted losses]).
    const std::string lost =
        r.loss_counted()
            ? fmt::format("{} events dropped", r.dropped_count())
            : fmt::format("at least {} events dropped, more uncounted", r.dropped_count());
    fmt::print(stderr, "tidemark: trace incomplete: {} ({})\n", lost,
               writer_error ? "the recording stopped writing: " + *writer_error +
                                  (r.loss_counted() ? "" : "; the final count could not be stored")
                            : std::string("the program emitted events faster than they were "
                                          "written; a larger TIDEMARK_BUFFER_KB helps"));
  } else if (!r.clean_end()) {
    fmt::print(stderr,
               "tidemark: trace incomplete: events dropped uncounted (the recording did not close "
               "its file: the program was killed, or its writer stopped)\n");
  }
  for (const analysis::DeviceRef& d : trace.devices()) {
    analysis::DeviceSummary s = analysis::summarize_device(trace, d);
    if (s.alloc_count == 0 && s.peak_reserved_bytes == 0) continue;
    fmt::print(stderr,
               "tidemark: {}: peak allocated {}, peak reserved {}, {} allocations, {} still "
               "allocated at the end\n",
               s.device, analysis::format_bytes(s.peak_allocated_bytes),
               analysis::format_bytes(s.peak_reserved_bytes), s.alloc_count,
               analysis::format_bytes(s.final_allocated_bytes));
  }
  fmt::print(stderr, "tidemark: next: tidemark summary {}\n", path);
  return r.dropped_count() == 0 && !writer_error && r.clean_end();
}

namespace {

volatile sig_atomic_t g_child = 0;

// SIGINT, SIGTERM and SIGHUP go to the child: it decides how to stop, and we finalize what it
// wrote. (SIGKILL cannot be caught: docs/cli.md, "record", says what it leaves.)
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

void forward_signal(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// Note [Recording lock]
// Two `tidemark record -o FILE` at once would each remove the other's file and finalize the
// other's recording. So record holds an advisory lock (flock) on FILE.lock, beside FILE, from
// before the program starts until its trace is finalized; a second record to FILE refuses at
// once, naming the first's pid. The lock goes with the process (a killed record releases it);
// the file is removed when done. A name with `%p` (or the default name) is the program's own
// and needs no lock. The lock file may sit in a directory others write (/tmp): it is opened
// without following a symlink, and one that is not a plain file of the user's with no other
// link is refused before anything is written to it, so a link planted there cannot make
// record overwrite another file.
class RecordingLock {
 public:
  explicit RecordingLock(const std::string& output) : path_(output + ".lock") {
    for (;;) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
      if (fd_ < 0 && errno == ELOOP)
        throw UsageError("-o " + output + ": the lock file " + path_ +
                         " is a symbolic link, which record never writes through; remove it");
      if (fd_ < 0)
        throw UsageError("-o " + output + ": cannot create the lock file " + path_ + ": " +
                         std::strerror(errno));
      refuse_unless_own(output);
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = {};
        ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
        ::close(fd_);
        fd_ = -1;
        const std::string who = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "?";
        throw UsageError("-o " + output + ": another tidemark record (pid " + who +
                         ") is recording to it; give each run its own file (`%p` in -o becomes "
                         "the program's pid)");
      }
      // The holder before us may have removed the file between our open and our lock: then
      // the lock is on a file nobody else will find; lock the one at the path instead.
      struct stat held {};
      struct stat at {};
      if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &at) == 0 && held.st_dev == at.st_dev &&
          held.st_ino == at.st_ino)
        break;
      ::close(fd_);
    }
    const std::string pid = std::to_string(::getpid());
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
      // The pid is only for the message of a record that finds the file locked.
    }
  }
  ~RecordingLock() {
    ::unlink(path_.c_str());  // before unlocking: who locks next creates a new file
    ::close(fd_);
  }
  RecordingLock(const RecordingLock&) = delete;
  RecordingLock& operator=(const RecordingLock&) = delete;

 private:
  // A lock file that is not a regular file of this user's with one link is another's, or a
  // hard link planted to a file of the user's: refused, untouched.
  void refuse_unless_own(const std::string& output) {
    struct stat st {};
    std::string problem;
    if (::fstat(fd_, &st) != 0)
      problem = std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
      problem = "is not a regular file";
    else if (st.st_uid != ::geteuid())
      problem = "is owned by user " + std::to_string(st.st_uid) + ", not by you";
    else if (st.st_nlink != 1)
      problem = "has other links (" + std::to_string(st.st_nlink) + ")";
    if (problem.empty()) return;
    ::close(fd_);
    fd_ = -1;
    throw UsageError("-o " + output + ": the lock file " + path_ + " " + problem +
                     "; record never writes to it: remove it, or record to another file");
  }
  std::string path_;
  int fd_ = -1;
};

std::string program_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  return name.empty() ? "program" : name;
}

// libtidemark_inject.so: next to the executable (build tree, then install layout), then where
// the build put it or installs it. Empty when this build has none.
std::string inject_library() {
#ifdef TIDEMARK_INJECT_NAME
  std::string found = find_library_beside(TIDEMARK_INJECT_NAME, "interpose", TIDEMARK_LIBDIR,
                                          TIDEMARK_INJECT_INSTALL_PATH, TIDEMARK_INJECT_BUILD_PATH);
  if (!found.empty()) return found;
  fmt::print(stderr,
             "tidemark: {} not found next to tidemark or at {}: CUDA and NVTX not recorded\n",
             TIDEMARK_INJECT_NAME, TIDEMARK_INJECT_INSTALL_PATH);
#endif
  return {};
}

// Finalizes the program's trace at `path` and prints its summary; returns the exit status
// (the program's `code`, unless the trace is unusable or --strict fails it).
int finish_trace(const RecordArgs& a, const std::string& path, int code, int64_t started_unix_ns,
                 const std::function<void()>& end_watch) {
  struct stat st {};
  // A recording that started before the program (an earlier run's file, left in place) is not
  // this run's: the program wrote none, and the old file is left as it was. (The program's
  // own children may record it too: `sh -c 'prog; ...'`; what counts is when.)
  auto recording_start = [&]() -> int64_t {
    try {
      return store::TraceReader::open(path, store::TraceReader::Require::upgradable)
          .meta()
          .start_unix_ns;
    } catch (const std::exception&) {
      return started_unix_ns;  // unreadable: finalize says what is wrong with it
    }
  };
  // A file that is not a trace (replaced only if the program records: --force) is not one.
  const bool exists = ::stat(path.c_str(), &st) == 0 && store::is_trace_file(path);
  const bool earlier = exists && recording_start() < started_unix_ns;
  if (!exists || earlier) {
    end_watch();
    fmt::print(stderr, "tidemark: {} wrote no trace to {}{} ({})\n", a.command[0], path,
               earlier ? " (the trace there is an earlier run's, left as it was)" : "",
               is_python_command(a.command) ? "a Python program's PyTorch memory is recorded by "
                                              "the Python hook, which --no-python-hook "
                                              "turned off"
                                            : "if it did not say why above, is it linked with "
                                              "Tidemark::autostart?");
    return a.strict && code == 0 ? kExitCheckFailed : code;  // no trace lost every event
  }
  try {
    {
      Progress p(a.watch ? std::string() : "finalizing " + path);
      record::finalize_trace(path);
    }
    end_watch();  // its last line (the peaks) before the summary
    // The exit status stays the program's; --strict fails a run whose trace lost events
    // (docs/cli.md, "record").
    if (!print_summary(path) && a.strict && code == 0) return kExitCheckFailed;
  } catch (const std::exception& e) {
    end_watch();
    fmt::print(stderr, "tidemark: {}\n", e.what());
    return code != 0 ? code : kExitUsage;
  }
  return code;
}

// The traces a run's ranks wrote for `pattern` (a name with %r, expanded by each rank) since
// `started_unix_ns`, in rank order.
std::vector<std::string> rank_files(const std::string& pattern, int64_t started_unix_ns) {
  const std::filesystem::path p(pattern);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  const std::string name = p.filename().string();
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (!record::matches_output_pattern(name, file)) continue;
    const std::string full = p.has_parent_path() ? (dir / file).string() : file;
    if (!store::is_trace_file(full)) continue;
    try {
      const auto meta =
          store::TraceReader::open(full, store::TraceReader::Require::upgradable).meta();
      if (meta.start_unix_ns < started_unix_ns) continue;  // an earlier run's
    } catch (const std::exception&) {
      // unreadable: finalize says what is wrong with it
    }
    out.push_back(full);
  }
  std::sort(out.begin(), out.end(), [](const std::string& x, const std::string& y) {
    return std::make_pair(x.size(), x) < std::make_pair(y.size(), y);  // run-2 before run-10
  });
  return out;
}

}  // namespace

int run_record(const RecordArgs& a) {
  if (a.command.empty()) throw UsageError("record: no command given (tidemark record -- CMD ...)");
  const int stacks = a.no_stacks ? 0 : a.stacks;

  // Note [Output patterns]: the rank of this process, when mpirun started it (`mpirun -np 2
  // tidemark record -o run-%r.db -- prog`); none when this command starts mpirun (`tidemark
  // record -o run-%r.db -- mpirun -np 2 prog`): then each rank names its own file, found below.
  const record::RankEnv ranks = record::rank_from_env();
  if (std::string problem = record::shared_file_problem(a.output, ranks);
      !a.output.empty() && !problem.empty())
    throw UsageError("-o " + problem);
  const bool ranks_name_files = record::has_pattern(a.output, 'r') && !ranks.rank;
  // The default name is the program's by its pid, expanded here (the program's own children,
  // `sh -c 'prog'`, record into it too); a rank's also names the rank, which its recorder
  // expands (Note [Output patterns]: a name without %r under several ranks is refused).
  auto pattern_of = [&](pid_t child) {
    if (!a.output.empty()) return a.output;
    std::string name;
    for (char c : program_name(a.command[0])) name += c == '%' ? "%%" : std::string(1, c);
    return "tidemark-" + name + (ranks.rank ? "-rank%r-" : "-") + std::to_string(child) + ".db";
  };
  auto output_of = [&](pid_t child) {
    return record::expand_output_path(pattern_of(child), child, ranks).path;
  };

  const std::string inject = a.no_cuda ? std::string() : inject_library();
  // A Python program: the startup hook that records PyTorch's allocator (record_python.h).
  std::optional<PythonHook> hook;
  if (!a.no_python_hook && is_python_command(a.command)) {
    hook.emplace(a);
    if (hook->hook_dir().empty()) {
      fmt::print(stderr,
                 "tidemark: the Python hook (sitecustomize.py) was not found next to tidemark: "
                 "PyTorch's memory is not recorded\n");
      hook.reset();
    }
  }
  const std::vector<std::string> python_env =
      hook ? hook->environment(!inject.empty()) : std::vector<std::string>{};
  if (a.dry_run) {
    fmt::print("would run: {}\n", fmt::join(a.command, " "));
    fmt::print("  TIDEMARK_OUTPUT={}\n", pattern_of(0));
    if (!inject.empty())
      fmt::print("  CUDA_INJECTION64_PATH={0}\n  NVTX_INJECTION64_PATH={0}\n", inject);
    for (const std::string& e : python_env) fmt::print("  {}\n", e);
    if (hook)
      fmt::print(
          "the Python hook {}/sitecustomize.py (then any sitecustomize it hides) records PyTorch's "
          "CUDA "
          "allocator in every Python process; the snapshots are imported into the trace\n",
          hook->hook_dir());
    else if (!a.no_python_hook && inject.empty())
      fmt::print("a program linked with Tidemark::autostart records itself\n");
    return kExitOk;
  }

  // A named output (without `%p`) is expanded, then checked and locked before the program
  // starts. `%r` with no rank here is rank 0's name: the program's own when it is not
  // distributed, rank 0's when it starts the ranks (each rank's recorder checks its own).
  std::optional<RecordingLock> lock;
  if (!a.output.empty() && !record::has_pattern(a.output, 'p')) {
    const std::string fixed = output_of(0);
    lock.emplace(fixed);  // Note [Recording lock]
    struct stat st {};
    struct stat link {};
    if (::lstat(fixed.c_str(), &link) == 0 && !S_ISREG(link.st_mode))
      // A trace is a database with journals beside it: only a regular file can be one, and
      // --force replaces regular files only (a device node, a symlink, a directory never).
      throw UsageError(
          "-o " + fixed + ": " +
          (S_ISDIR(link.st_mode) ? "is a directory; give a file name"
           : S_ISLNK(link.st_mode)
               ? "is a symbolic link; give the file itself"
               : "is not a regular file (a device, a FIFO or a socket); give a file name"));
    if (::stat(fixed.c_str(), &st) == 0 && st.st_size > 0) {
      if (store::is_trace_file(fixed)) {
        fmt::print(stderr, "tidemark: {} holds an earlier trace: the recording replaces it\n",
                   fixed);
      } else if (!a.force) {
        throw UsageError("-o " + fixed +
                         ": the file exists and is not a Tidemark trace; recording would "
                         "replace it (--force to do so)");
      }
    }
  }

  // The exec result travels back through a close-on-exec pipe: empty on success, errno else.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw UsageError(std::string("record: pipe: ") + std::strerror(errno));

  // Resolve the output path before forking only when given; the default needs the child pid.
  const pid_t self = ::getpid();  // the finalizer (getppid() in the child could already be 1)
  // A trace whose recording started before this is not this run's (a file an earlier run left).
  const int64_t started_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
  pid_t pid = ::fork();
  if (pid < 0) throw UsageError(std::string("record: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    // The pattern itself: the recorder expands it in each process that records (each rank).
    ::setenv("TIDEMARK_OUTPUT", pattern_of(::getpid()).c_str(), 1);
    ::setenv("TIDEMARK_STACKS", std::to_string(stacks).c_str(), 1);
    ::setenv("TIDEMARK_TENSORS", a.no_tensors ? "0" : "1", 1);
    ::setenv("TIDEMARK_FINALIZE", "0", 1);
    if (a.force) ::setenv("TIDEMARK_FORCE", "1", 1);
    ::setenv("TIDEMARK_FINALIZER_PID", std::to_string(self).c_str(), 1);  // this tidemark
    // Processes the program starts write their own <stem>-<pid> files (docs/interpose.md).
    ::setenv("TIDEMARK_ROOT_PID", std::to_string(::getpid()).c_str(), 1);
    if (a.step_range) ::setenv("TIDEMARK_STEP_RANGE", a.step_range->c_str(), 1);
    if (!inject.empty()) {
      ::setenv("CUDA_INJECTION64_PATH", inject.c_str(), 1);
      ::setenv("NVTX_INJECTION64_PATH", inject.c_str(), 1);
    }
    ::signal(SIGXFSZ,
             SIG_DFL);  // the program's own, not tidemark's (Note [Output that did not get out])
    for (const std::string& e : python_env) {
      const size_t eq = e.find('=');
      ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    if (a.program_stdout_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
    std::vector<char*> argv;
    for (const std::string& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    int err = errno;
    ssize_t ignored = ::write(fds[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::close(fds[1]);
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old[std::size(kForwarded)] = {};
  for (size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &sa, &old[i]);

  int exec_errno = 0;
  ssize_t n;
  do n = ::read(fds[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  ::close(fds[0]);

  // The program's file: `%p` in -o is its pid (docs/recording.md), as the recorder expands it.
  const std::string path = output_of(pid);
  // --watch: `tidemark watch`'s lines on stderr while the program runs, until the trace is
  // finalized below (or will not be: the program wrote none, or finalize failed).
  struct WatchThread {
    std::atomic<bool> over{false};
    std::thread thread;
    void end() {
      over = true;
      if (thread.joinable()) thread.join();
    }
    ~WatchThread() { end(); }
  } watcher;
  if (a.watch && n == 0 && ranks_name_files)
    fmt::print(stderr,
               "tidemark: --watch: each rank names its own file ({}); watch one with "
               "`tidemark watch FILE`\n",
               a.output);
  if (a.watch && n == 0 && !ranks_name_files) {
    WatchArgs w;
    w.file = path;
    w.out = stderr;
    w.stop = &watcher.over;                  // also: wait for the file as long as the program runs
    w.not_before_unix_ns = started_unix_ns;  // a file an earlier run left is not this one's
    // The forwarded signals stay with this thread, which forwards them to the program.
    sigset_t block, old_mask;
    sigemptyset(&block);
    for (int sig : kForwarded) sigaddset(&block, sig);
    ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    watcher.thread = std::thread([w] {
      try {
        run_watch(w);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tidemark: watch: %s\n", e.what());
      }
    });
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  }
  auto end_watch = [&] { watcher.end(); };

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &old[i], nullptr);

  if (n == static_cast<ssize_t>(sizeof exec_errno))
    throw UsageError("record: cannot run " + a.command[0] + ": " + std::strerror(exec_errno));

  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFSIGNALED(status))
    fmt::print(stderr, "tidemark: {} was killed by signal {} ({})\n", a.command[0],
               WTERMSIG(status), strsignal(WTERMSIG(status)));

  if (hook) {
    end_watch();
    const int r = hook->finish(path, code, started_unix_ns, pid);
    if (r != -1) return r;
  }
  if (!ranks_name_files) return finish_trace(a, path, code, started_unix_ns, end_watch);
  end_watch();
  // The ranks' files, which only they could name (Note [Output patterns]).
  const std::vector<std::string> found = rank_files(a.output, started_unix_ns);
  if (found.empty()) {
    fmt::print(stderr,
               "tidemark: {} wrote no trace named like {} (if it did not say why above, "
               "is it linked with Tidemark::autostart?)\n",
               a.command[0], a.output);
    return a.strict && code == 0 ? kExitCheckFailed : code;
  }
  int result = code;
  for (const std::string& f : found) {
    const int c = finish_trace(a, f, code, started_unix_ns, [] {});
    if (c != code) result = c;
  }
  return result;
}

}  // namespace tidemark::cli
