// Shared pieces of the `tidemark` commands: exit codes, errors, opening traces, parsing times.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::cli {

// Exit codes (docs/cli.md): 0 success, 1 a check failed, 2 bad usage or unreadable input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;

// Bad usage or input: main prints the message as one line on stderr and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Note [Open files]
// A command that reads several traces at once (`merge`, and `summary`, `diagnose`, `check` over
// the ranks of a run) keeps each open: one file for a finished trace (24 finalized traces: 24
// files open at most in summary and check, 25 in diagnose, 28 in merge), three for one with a
// -wal (being recorded, or crashed: the file, its -wal and -shm). A run of a thousand ranks needs
// more files than the usual soft limit (1024), and running out midway used to abort. So such a
// command first raises its soft limit of open files (RLIMIT_NOFILE) as far as the hard limit
// allows, as a process may; when even the hard limit is too low it refuses at once (exit 2), naming
// the limit and what to do. `files` traces need at most kFilesPerTrace each.
inline constexpr size_t kFilesPerTrace = 3;
void ensure_open_files(size_t files, const std::string& what);

// Shows what the tool is doing on stderr while it works, only when stderr is a terminal (and
// `what` is not empty); the line is erased when the work is done.
class Progress {
 public:
  explicit Progress(const std::string& what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  bool shown_ = false;
};

// A private folder in the temporary directory (mkdtemp: the user's, no one else may enter),
// made on the first path() and removed, with what is in it, when this goes. `who` names the
// command in the error when it cannot be made (UsageError).
class PrivateDir {
 public:
  PrivateDir(std::string prefix, std::string who);
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path();                  // the folder, made now if it is not yet
  std::string file(const std::string& name);  // a path inside it

 private:
  std::string prefix_, who_, dir_;
};

// Opens a finalized trace (or a raw one). StoreError (naming the file) propagates.
// Which frames make a site in every trace this process opens (`--frames`, Note [Allocation
// site]): set before open_trace.
using analysis::Frames;
void set_frames(Frames frames);

// Custom categories for the traces this process opens (Note [Category rules]): the commands
// that group by category (summary, top, timeline, diff, report) call it with --categories
// (empty: tidemark-categories.json beside the trace, if any: CategoryRules::find).
void use_category_rules(const std::string& file);

// Note [Snapshots as traces] (profiler/importers/temporary_import.h): every command that reads
// a trace also reads a PyTorch memory snapshot, imported into a temporary trace. trace_file_for
// gives the file to open: `path` itself, or the trace imported from it (an import error is a
// UsageError naming `path`).
std::string trace_file_for(const std::string& path);
// Opens trace_file_for(path), named `path` in what it says (Trace::shown_path).
analysis::Trace open_trace(const std::string& path, bool require_finalized = true);

// An estimated trace (Trace::estimated, docs/estimate.md) says so: `estimated` in a --json
// output (the account, or null for a trace a GPU ran or an account that is not JSON) and a line
// in the text.
void label_estimate(nlohmann::json& j, const analysis::Trace& t);
void print_estimate_label(const analysis::Trace& t);

// Text for XML and HTML (JUnit reports, the HTML report): & < > " ' as entities.
std::string markup_escape(std::string_view s);

// The devices a command reports: the one named by --device, else every device of the trace.
std::vector<analysis::DeviceRef> select_devices(const analysis::Trace& trace,
                                                const std::string& device_spec);
// The device a single-device command reports: --device, else the highest allocated peak.
analysis::DeviceRef primary_device(const analysis::Trace& trace, const std::string& device_spec);

// A time on the command line ("1.5s", "200ms", "123456ns"), relative to the trace origin,
// as an absolute event-clock time. Throws UsageError naming the option.
uint64_t parse_time(const analysis::Trace& trace, const std::string& option,
                    const std::string& value);
uint64_t parse_size_option(const std::string& option, const std::string& value);
// A device's memory (--capacity): a size of at most 1 PiB, more than any device has. Throws
// UsageError naming the option.
uint64_t parse_capacity_option(const std::string& option, const std::string& value);

// Note [Live recordings]
// A trace is still being written while its recording process (meta `pid`) runs, and will
// still be finalized while the process that finalizes it afterwards (meta `finalizer_pid`:
// `tidemark record`) runs. Only answerable on the host that records (meta `host`): elsewhere a
// pid names another process. `watch` waits for such a recording; `finalize` refuses to touch
// it. A pid reused by an unrelated process reads as alive (finalize --force overrides).
struct RecordingProcesses {
  bool known = false;      // on this host, with a recorded pid: the answer below means something
  int64_t alive_pid = 0;   // the recording process, else the finalizer, if alive; 0: neither
  bool finalizer = false;  // alive_pid is the finalizer
  // "tidemark record (pid N) finalizes it when the program ends" or "the recording process
  // (pid N) is running", for messages about a live recording.
  std::string who() const;
};
RecordingProcesses recording_processes(const std::string& host, int64_t pid, int64_t finalizer_pid);

// JSON as the commands print it (`indent` -1: one line). Text that is not UTF-8 -- a program
// argument in Latin-1, a scope name or frame with byte 0xFF -- never fails the output: each
// invalid byte becomes U+FFFD (docs/cli.md, "Conventions").
std::string json_text(const nlohmann::json& j, int indent = 2);

// A library shipped with tidemark (`name`): beside the executable in the build tree
// (../`build_dir`/), installed (../`libdir`/), else at the paths compiled in. Empty when none is
// there.
std::string find_library_beside(const std::string& name, const std::string& build_dir,
                                const std::string& libdir, const std::string& install_path,
                                const std::string& build_path);

bool stdout_is_terminal();
int terminal_columns();

}  // namespace tidemark::cli
