// The `tidemark` subcommands: options as parsed by main.cpp, and the functions that run them.
// Each returns the process exit code (common.h) and throws UsageError / StoreError for input
// it cannot use.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/diagnose.h"

namespace tidemark::cli {

struct RecordArgs {
  std::string output;  // default: tidemark-<program>-<pid>.db
  int stacks = 16;
  bool no_stacks = false;
  bool no_tensors = false;
  bool no_cuda = false;  // do not inject libtidemark_inject.so (CUDA and NVTX)
  // The NVTX range that marks a step in an injected program (default "step"; "": none).
  std::optional<std::string> step_range;
  bool watch = false;   // `tidemark watch`'s lines on stderr while the program runs
  bool force = false;   // replace an existing -o FILE that is not a Tidemark trace
  bool strict = false;  // exit 1 (when the program exited 0) if the trace lost events
  // Python programs (record_python.h): the startup hook that records PyTorch's allocator.
  bool no_python_hook = false;
  uint64_t max_entries = 100000;         // allocator history entries each process keeps
  std::string python_stacks = "python";  // python or all (C++ frames too)
  std::string step_on;                   // MODULE:FUNC that ends a step (default: optimizer steps)
  bool dry_run = false;                  // print what would run and be injected; run nothing
  std::vector<std::string> command;
  // Set by `estimate`, which records through the same hook (estimate.cpp): more of the
  // program's environment (NAME=value), and its standard output sent to standard error (--json
  // is the command's alone); no summary printed.
  std::vector<std::string> environment;
  bool program_stdout_to_stderr = false;
  bool quiet = false;
};
int run_record(const RecordArgs& a);

// `tidemark estimate -- python train.py` (docs/estimate.md).
struct EstimateArgs {
  std::string output;                     // default: tidemark-<program>-<pid>.db, as record
  std::string gpu;                        // a card of the hook's table (default there)
  std::string device_memory;              // bytes of device memory instead of the card's
  std::optional<std::string> alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF (default: the environment's)
  std::string sweep;  // NAME=V1,V2,...: once per value, {NAME} replaced in the command
  bool json = false;
  std::vector<std::string> command;
  std::string
      fix;  // fixes the hook applies at run time (diagnose --verify: Note [Fixes at run time])
};
int run_estimate(const EstimateArgs& a);
// One run of `command` under the estimate into `output` (the program's standard output on
// stderr when `json_out`), and what it estimated.
struct EstimateOutcome {
  int code = 0;                    // the program's exit status
  std::string trace;               // the trace written ("" when none)
  std::string account;             // the hook's account, as the trace has it (meta estimated)
  nlohmann::json estimated;        // the same, parsed (null when the program never used torch)
  analysis::DeviceSummary device;  // the faked GPU's figures
  bool has_device = false;
  uint64_t capacity = 0;
  bool unsound() const;
  bool fits() const { return has_device && device.oom_count == 0; }
};
EstimateOutcome estimate_once(const EstimateArgs& a, const std::vector<std::string>& command,
                              const std::string& output, bool json_out);
// Refuses (UsageError, naming `command_name`) a command estimate cannot run: none, not
// Python, or the hook or the allocator library missing.
void check_estimate_command(const std::string& command_name,
                            const std::vector<std::string>& command);
// The trace a run of `command` is kept in by default: tidemark-estimate-<script>-<pid>.db.
std::string default_estimate_output(const std::vector<std::string>& command);

struct SummaryArgs {
  std::string file, device;
  std::vector<std::string> files;  // several: one trace per rank (Note [Several ranks])
  bool json = false;
  size_t limit = 10;
};
int run_summary(const SummaryArgs& a);
int run_info(const std::string& file, bool json);
// Refuses a trace still being recorded (Note [Live recordings] in common.h) unless `force`.
int run_finalize(const std::string& file, bool force);

struct TopArgs {
  std::string file, device, at = "peak", by = "site";
  std::string source;  // --file: GroupBy::line attributes to this source file (Note [Source lines])
  size_t limit = 10;
  bool json = false;
  bool folded = false;    // every stack as a folded line, for flame graphs
  bool reserved = false;  // the segments reserved at the reserved peak, not allocations
};
int run_top(const TopArgs& a);

struct LeaksArgs {
  std::string file, device, by = "site";
  bool by_step = false, json = false;
  bool folded = false;  // every stack as a folded line, for flame graphs
  size_t limit = 10;
};
int run_leaks(const LeaksArgs& a);

struct SimpleArgs {
  std::string file, device;
  bool json = false;
  size_t limit = 10;
};
int run_steps(const SimpleArgs& a);
int run_syncs(const SimpleArgs& a);

struct WatchArgs {
  std::string file, device, interval = "1s", wait = "10s";
  bool once = false, json = false;
  // Inside `tidemark record --watch`: lines go to `out` (stderr there), no signal handlers are
  // installed (record forwards them to the program), and `stop` set means the recording ended
  // (finalized, or never to be): the watch prints what is left and returns.
  std::FILE* out = stdout;
  const std::atomic<bool>* stop = nullptr;  // also: wait for the file until stopped, not `wait`
  // A trace whose recording started before this (wall clock, ns) is an earlier run's: wait for
  // the program to replace it. 0: any.
  int64_t not_before_unix_ns = 0;
};
int run_watch(const WatchArgs& a);

struct DiffArgs {
  std::string a, b;
  std::string by = "site", source;  // --by site|line, --file (Note [Source lines])
  bool json = false;
  bool folded = false;  // the stacks at each peak, as differential folded lines
  size_t limit = 10;
};
int run_diff(const DiffArgs& a);

struct CheckArgs {
  std::string file;
  std::vector<std::string> files;  // several: one trace per rank (Note [Several ranks])
  std::optional<std::string> max_peak_allocated, max_peak_reserved, max_leaked;
  std::optional<uint64_t> max_syncs_per_step;
  std::string baseline;
  std::optional<double> max_increase;
  std::string junit;
  bool json = false;
  // --no-findings [ID,...]: fail when any of these findings (all, when empty) is present;
  // minor ones only with --all (Note [Severity] in profiler/diagnose/diagnose.h).
  std::optional<std::string> no_findings;
  bool all_findings = false;
};
int run_check(const CheckArgs& a);

struct DiagnoseArgs {
  std::string file;
  std::vector<std::string> files;  // several: one trace per rank (Note [Several ranks])
  std::string only;                // comma-separated detector ids; empty: all
  bool json = false;
  bool all = false;  // minor findings too (Note [Severity])
  // --verify -- CMD...: the program is estimated, diagnosed, and each fix measured by running
  // it again (diagnose_verify.cpp); `file` is then where its trace is kept.
  std::vector<std::string> command;
};
int run_diagnose(const DiagnoseArgs& a);
int run_diagnose_verify(const DiagnoseArgs& a);
// The text of a diagnosis of trace `t` (named `name`), with a line after each finding's fix
// (`after_fix[i]`, none where empty or missing).
void print_diagnosis(const analysis::Trace& t, const std::string& name,
                     const diagnose::Diagnosis& d, const std::vector<std::string>& after_fix);
// "leak,sync-in-loop" -> ids; an unknown id throws UsageError naming `option` and the known ids.
std::set<std::string> parse_finding_ids(const std::string& option, const std::string& list);
// The JSON contract of `diagnose --json` (docs/cli.md): {findings: [...], skipped: [...]}.
nlohmann::json diagnosis_json(const diagnose::Diagnosis& d);

struct ReplayArgs {
  std::string file, device, output;
  std::optional<std::string> alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF syntax; none: as recorded
  std::optional<std::string> capacity;    // a size; none: the recorded device's, else unlimited
  std::optional<double> memory_fraction;
  bool sweep = false, json = false;
  unsigned threads = 0;  // sweep threads (0: the machine's cores)
};
int run_replay(const ReplayArgs& a);

struct PredictArgs {
  std::vector<std::string> runs;         // X=FILE: the varied size's value and a trace or snapshot
  std::string at;                        // comma-separated values to predict at
  std::vector<std::string> alloc_confs;  // PYTORCH_CUDA_ALLOC_CONF syntax; none: as recorded
  std::optional<std::string> capacity;   // a size; none: the largest run's device, else unlimited
  std::string device;
  size_t sites = 8;
  bool json = false;
};
int run_predict(const PredictArgs& a);

struct ReportArgs {
  std::string file, output, device;
};
// The self-contained HTML report (cli/html_report.cpp, Note [The HTML report]).
int run_report(const ReportArgs& a);

// The MCP server on stdio (cli/mcp.cpp, Note [The MCP server]); returns at end of input.
int run_mcp();

struct TimelineArgs {
  std::string file, device, from, to, png, svg;
  size_t width = 0;   // 0: the terminal's width (text) or 1200 (images)
  size_t height = 0;  // rows (text, default 12) or pixels (images, default 360)
  bool json = false;
};
int run_timeline(const TimelineArgs& a);

// `onto`: a finalized trace recorded from the same run by libtidemark_inject.so ("": none);
// the snapshot's blocks are lined up with its segments (profiler/importers/lineup.h).
// Several snapshots: one per rank (the number in each name), merged into one trace.
// `rank`: the rank of a single snapshot (meta `rank`).
int run_import(const std::vector<std::string>& snapshots, const std::string& output,
               const std::string& onto, uint64_t max_events, std::optional<int64_t> rank);
// Several ranks' traces (cli/ranks.cpp, Note [Several ranks]).
struct RankedFile {
  int64_t rank = 0;
  std::string path;
};
// The files' ranks (meta `rank`, else the number in the name), in rank order; throws
// UsageError when they are not of one run (a rank twice, different world sizes, no rank).
std::vector<RankedFile> ranked_files(const std::vector<std::string>& files);
int run_summary_ranks(const SummaryArgs& a);
int run_diagnose_ranks(const DiagnoseArgs& a);
int run_merge(const std::vector<std::string>& inputs, const std::string& output, bool json);

int run_export(const std::string& file, const std::string& format, const std::string& output,
               bool no_categories);

}  // namespace tidemark::cli
