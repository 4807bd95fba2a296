// tidemark: record a program, then ask its trace how high memory went, when, because of what,
// what leaked, where it waited on the device, and what changed between two runs.
// docs/cli.md describes every command, the JSON output and the exit codes.
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/output_file.h"
#include "profiler/replay/replay.h"
#include "profiler/store/trace_format.h"

namespace tc = tidemark::cli;

namespace {

// A one-line error: "tidemark: <message>" (StoreError messages already name the file).
int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n') c = ' ';
  std::fprintf(stderr, "tidemark: %s\n", line.c_str());
  return tc::kExitUsage;
}

CLI::App* command(CLI::App& app, const char* name, const char* what, const char* example) {
  CLI::App* sub = app.add_subcommand(name, what);
  sub->footer(std::string("Example:\n  ") + example);
  return sub;
}

// --folded on a reporting command: the stacks as flame-graph input, instead of what the
// options it `excludes` shape (a combination is refused with exit 2).
void add_folded(CLI::App* cmd, bool& flag, const char* what,
                std::initializer_list<CLI::Option*> excludes) {
  CLI::Option* folded = cmd->add_flag("--folded", flag, what);
  for (CLI::Option* o : excludes) folded->excludes(o);
}

// Numbers on the command line are checked as text, before CLI11 converts them: it would wrap
// "-1" into 2^64-1 for an unsigned option, and "nan" passes every comparison. A failure names
// the option (CLI11 prefixes it) and exits 2.
const CLI::Validator kCount(
    [](std::string& v) -> std::string {
      bool digits = !v.empty() && v.size() <= 18;
      for (char c : v) digits = digits && c >= '0' && c <= '9';
      return digits ? std::string() : "expected a whole number >= 0, got '" + v + "'";
    },
    "N");
const CLI::Validator kPercent(
    [](std::string& v) -> std::string {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      const bool ok = !v.empty() && end == v.c_str() + v.size() && std::isfinite(x) && x >= 0;
      return ok ? std::string() : "expected a percentage >= 0 such as 10 or 2.5, got '" + v + "'";
    },
    "PCT");
// --frames on a reporting command: which frames make an allocation's site (Note [Allocation
// site]): the user's own code (the default) or the innermost of any.
void add_frames(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--frames",
         [](const std::string& v) {
           tc::set_frames(v == "all" ? tc::Frames::all : tc::Frames::user);
         },
         "Which frames name a site: user (your code, the default) or all (the innermost frame)")
      ->check(CLI::IsMember({"user", "all"}));
}

}  // namespace

static int run_command(int argc, char** argv) {
  CLI::App app{
      "tidemark: GPU and host memory profiler. Record a program, then summarise, chart, "
      "check and diff its trace.",
      "tidemark"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tidemark ") + TIDEMARK_VERSION);
  app.footer(
      "Examples:\n"
      "  tidemark record -o run.db -- ./train 100\n"
      "  tidemark summary run.db\n"
      "  tidemark check run.db --max-peak-allocated 2GiB --max-leaked 0\n"
      "  tidemark diagnose run.db\n"
      "Exit codes: 0 success, 1 a check failed, 2 bad usage or unreadable input.");

  tc::RecordArgs rec;
  CLI::App* record = command(app, "record", "Run a program and record its memory events",
                             "tidemark record -o run.db --stacks 24 -- ./train_mlp 200");
  record->add_option("-o,--output", rec.output, "Trace file (default tidemark-<program>-<pid>.db)");
  record->add_option("--stacks", rec.stacks, "Native frames per stack (0-64)")
      ->check(CLI::Range(0, 64));
  record->add_flag("--no-stacks", rec.no_stacks, "Do not capture stacks")
      ->excludes(record->get_option("--stacks"));
  record->add_flag("--no-tensors", rec.no_tensors, "Do not record tensor and storage events");
  record->add_flag("--no-cuda", rec.no_cuda,
                   "Do not inject libtidemark_inject.so (CUDA memory, copies, syncs, NVTX)");
  record->add_flag("--force", rec.force,
                   "Replace an existing -o FILE that is not a Tidemark trace");
  record->add_flag("--strict", rec.strict,
                   "Exit 1 when the trace is incomplete (events dropped), if the program exited 0");
  record->add_flag("--watch", rec.watch,
                   "Print memory per step on stderr while the program runs (tidemark watch)");
  record->add_option("--step-range", rec.step_range,
                     "NVTX range that starts each step of an injected program: NAME, NAME#N, "
                     "NAME N (default step; \"\" for none)");
  record->add_flag("--no-python-hook", rec.no_python_hook,
                   "Do not inject the Python startup hook that records PyTorch's CUDA allocator");
  record
      ->add_option("--max-entries", rec.max_entries,
                   "Python: allocator history entries each process keeps (its last ones)")
      ->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 40));
  record
      ->add_option("--python-stacks", rec.python_stacks,
                   "Python: the frames each allocation keeps: python, or all (C++ too)")
      ->check(CLI::IsMember({"python", "all"}));
  record->add_option("--step-on", rec.step_on,
                     "Python: MODULE:FUNC whose return ends a step, __main__:FUNC for the "
                     "script's own (default: each optimizer step)");
  record->add_flag("--dry-run", rec.dry_run,
                   "Print what would run and be injected, and run nothing");
  // The program and its arguments follow "--" (split off before parsing, so the program's
  // own options are never taken for ours), or the first argument that is not an option.
  record->prefix_command();

  tc::EstimateArgs est;
  CLI::App* estimate =
      command(app, "estimate",
              "Run a PyTorch script on the CPU with its GPU faked: the GPU memory it would use",
              "tidemark estimate --gpu h100-80gb -o run.db -- python train.py --batch 64");
  estimate->add_option("-o,--output", est.output,
                       "Trace file (default tidemark-estimate-<script>-<pid>.db)");
  estimate->add_option("--gpu", est.gpu,
                       "The card: a100-40gb, a100-80gb (default), h100-80gb, h200, l4, l40s, "
                       "a10g, rtx-4090, rtx-3090, t4, v100-32gb");
  estimate->add_option("--device-memory", est.device_memory,
                       "Device memory instead of the card's, e.g. 24GiB (where it runs out)");
  estimate->add_option("--alloc-conf", est.alloc_conf,
                       "PYTORCH_CUDA_ALLOC_CONF for the estimate (default: the environment's)");
  estimate->add_option("--sweep", est.sweep,
                       "NAME=V1,V2,...: run once per value, {NAME} replaced in the command; "
                       "print each peak and the largest value that fits");
  estimate->add_flag("--json", est.json, "JSON on stdout (the program's output on stderr)");
  estimate->prefix_command();

  tc::SummaryArgs sum;
  CLI::App* summary =
      command(app, "summary",
              "Peaks per device, top allocation sites at the peak, reserved memory by site, leaks",
              "tidemark summary run.db --device cuda:0 --json");
  summary->add_option("file", sum.files, "Trace file (several: one per rank of a run)")->required();
  summary->add_option("--device", sum.device, "Only this device (cpu, cuda:0)");
  summary->add_option("--limit", sum.limit, "Sites listed")->check(kCount);
  summary->add_flag("--json", sum.json, "Print JSON (docs/cli.md)");

  std::string info_file;
  bool info_json = false;
  CLI::App* info = command(app, "info", "What a trace file holds (meta data, tables, state)",
                           "tidemark info run.db");
  info->add_option("file", info_file, "Trace file")->required();
  info->add_flag("--json", info_json, "Print JSON");

  std::string fin_file;
  CLI::App* finalize =
      command(app, "finalize",
              "Build the derived tables of a trace (a crashed or killed run), upgrading a trace "
              "of an older schema version",
              "tidemark finalize crashed.db");
  finalize->add_option("file", fin_file, "Trace file")->required();
  bool fin_force = false;
  finalize->add_flag("--force", fin_force,
                     "Finalize even though the process recorded as recording it (or finalizing "
                     "it) is alive: a stale pid, now another process's");

  tc::TimelineArgs tla;
  CLI::App* timeline = command(app, "timeline",
                               "Allocated and reserved memory over time, in the terminal or as "
                               "an image",
                               "tidemark timeline run.db --from 1s --to 2.5s --png timeline.png");
  timeline->add_option("file", tla.file, "Trace file")->required();
  timeline->add_option("--device", tla.device, "Device (default: the highest peak)");
  timeline->add_option("--from", tla.from, "Start, relative to the trace start (1.5s, 200ms)");
  timeline->add_option("--to", tla.to, "End, relative to the trace start");
  timeline->add_option("--width", tla.width, "Columns (terminal) or pixels (images)")
      ->check(kCount)
      ->check(CLI::Range(1, 100000));
  timeline->add_option("--height", tla.height, "Rows (terminal) or pixels (images)")
      ->check(kCount)
      ->check(CLI::Range(2, 10000));
  auto* png = timeline->add_option("--png", tla.png, "Write a PNG image");
  auto* svg = timeline->add_option("--svg", tla.svg, "Write an SVG image");
  png->excludes(svg);
  timeline->add_flag("--json", tla.json, "Print the columns as JSON");

  tc::TopArgs top_args;
  CLI::App* top = command(app, "top", "What was live at a time, grouped",
                          "tidemark top run.db --at step:10 --by scope --limit 5");
  top->add_option("file", top_args.file, "Trace file")->required();
  top->add_option("--device", top_args.device, "Device (default: the highest peak)");
  top->add_option("--at", top_args.at, "peak, a time (1.5s, 200ms) or step:N");
  CLI::Option* top_by = top->add_option("--by", top_args.by, "site, stack, scope, category or line")
                            ->check(CLI::IsMember({"site", "stack", "scope", "category", "line"}));
  top->add_option(
      "--file", top_args.source,
      "With --by line: the source file whose lines the bytes go to (model.py, pkg/model.py)");
  CLI::Option* top_limit =
      top->add_option("--limit", top_args.limit, "Groups listed (0: all)")->check(kCount);
  CLI::Option* top_json = top->add_flag("--json", top_args.json, "Print JSON");
  top->add_flag("--reserved", top_args.reserved,
                "The segments reserved at the reserved peak (by the stacks that reserved them: "
                "cudaMalloc/cuMemMap in an injected program) instead of allocations");
  add_folded(top, top_args.folded,
             "Print every stack as a folded line (outermost;...;innermost BYTES) for "
             "flamegraph.pl, speedscope or inferno",
             {top_json, top_by, top_limit});

  tc::LeaksArgs leak_args;
  CLI::App* leaks = command(app, "leaks", "Allocations still allocated at the end of the trace",
                            "tidemark leaks run.db --by-step");
  leaks->add_option("file", leak_args.file, "Trace file")->required();
  leaks->add_option("--device", leak_args.device, "Only this device");
  CLI::Option* leaks_by = leaks->add_option("--by", leak_args.by, "site, stack, scope or category")
                              ->check(CLI::IsMember({"site", "stack", "scope", "category"}));
  CLI::Option* leaks_by_step =
      leaks->add_flag("--by-step", leak_args.by_step,
                      "Also: leaked bytes per step, and live bytes at each step boundary");
  CLI::Option* leaks_limit =
      leaks->add_option("--limit", leak_args.limit, "Groups listed (0: all)")->check(kCount);
  CLI::Option* leaks_json = leaks->add_flag("--json", leak_args.json, "Print JSON");
  add_folded(leaks, leak_args.folded,
             "Print every leaked stack as a folded line (outermost;...;innermost BYTES) for "
             "flamegraph.pl, speedscope or inferno",
             {leaks_json, leaks_by, leaks_by_step, leaks_limit});

  tc::SimpleArgs sync_args;
  CLI::App* syncs = command(app, "syncs", "Where the host waited on the device, by site",
                            "tidemark syncs run.db --limit 20");
  syncs->add_option("file", sync_args.file, "Trace file")->required();
  syncs->add_option("--limit", sync_args.limit, "Sites listed (0: all)")->check(kCount);
  syncs->add_flag("--json", sync_args.json, "Print JSON");

  tc::SimpleArgs step_args;
  CLI::App* steps = command(app, "steps", "Per-step peak, allocations and syncs",
                            "tidemark steps run.db --device cuda:0");
  steps->add_option("file", step_args.file, "Trace file")->required();
  steps->add_option("--device", step_args.device, "Device (default: the highest peak)");
  steps->add_flag("--json", step_args.json, "Print JSON");

  tc::WatchArgs wat;
  CLI::App* watch =
      command(app, "watch", "Follow a recording as it happens: memory per step, growth warnings",
              "tidemark watch run.db --interval 2s   (while tidemark record -o "
              "run.db -- ./train runs)");
  watch->add_option("file", wat.file, "Trace file being recorded (or a finished one)")->required();
  watch->add_option("--device", wat.device, "Device (default: the GPU once one appears, else cpu)");
  watch->add_option("--interval", wat.interval, "Time between updates (default 1s)");
  watch->add_option("--wait", wat.wait, "How long to wait for the file to appear (default 10s)");
  watch->add_flag("--once", wat.once, "Print the state once and exit");
  watch->add_flag("--json", wat.json, "Print JSON lines (docs/cli.md)");

  tc::CheckArgs chk;
  CLI::App* check = command(app, "check", "Fail (exit 1) when the trace breaks a limit: a CI gate",
                            "tidemark check run.db --max-peak-allocated 2GiB --max-leaked 0 "
                            "--junit check.xml");
  check->add_option("file", chk.files, "Trace file (several: one per rank of a run)")->required();
  check->add_option("--max-peak-allocated", chk.max_peak_allocated,
                    "Limit on the allocated peak of any device (512MiB, 2GiB, 1e9, bytes)");
  check->add_option("--max-peak-reserved", chk.max_peak_reserved,
                    "Limit on the reserved peak of any device");
  check->add_option("--max-leaked", chk.max_leaked,
                    "Limit on bytes still allocated at the end (all devices)");
  check->add_option("--max-syncs-per-step", chk.max_syncs_per_step, "Limit on syncs in a step")
      ->check(kCount);
  auto* base = check->add_option("--baseline", chk.baseline, "A baseline trace to compare with");
  auto* inc = check
                  ->add_option("--max-increase", chk.max_increase,
                               "Limit on the allocated peak's increase over the baseline, in %")
                  ->check(kPercent);
  base->needs(inc);
  inc->needs(base);
  auto* no_findings =
      check
          ->add_option("--no-findings", chk.no_findings,
                       "Fail when diagnose finds any of these (comma-separated ids; all when none "
                       "given)")
          ->expected(0, 1);
  check
      ->add_flag("--all", chk.all_findings,
                 "With --no-findings: minor findings fail the check too (docs/diagnoses.md)")
      ->needs(no_findings);
  check->add_option("--junit", chk.junit, "Also write the results as JUnit XML");
  check->add_flag("--json", chk.json, "Print JSON");

  tc::DiagnoseArgs dia;
  CLI::App* diagnose =
      command(app, "diagnose", "Name the memory pitfalls in a trace: evidence, code site, fix",
              "tidemark diagnose run.db --only graph-retention,sync-in-loop");
  diagnose->add_option("file", dia.files, "Trace file (several: one per rank of a run)");
  bool dia_verify = false;
  diagnose->add_flag("--verify", dia_verify,
                     "Run the PyTorch program after -- under the estimate, diagnose it, and "
                     "measure each fix by running it again with the fix applied");
  diagnose->add_option("--only", dia.only, "Only these detectors (comma-separated ids)");
  diagnose->add_flag("--all", dia.all,
                     "Also show minor findings (little at stake against the run's peak or "
                     "duration)");
  diagnose->add_flag("--json", dia.json, "Print JSON (docs/cli.md)");

  tc::ReplayArgs rpl;
  CLI::App* replay =
      command(app, "replay",
              "What-if: replay the trace's requests through the caching allocator under other "
              "settings (PYTORCH_CUDA_ALLOC_CONF, capacity)",
              "tidemark replay run.db --alloc-conf expandable_segments:True --capacity 80GB");
  replay->add_option("file", rpl.file, "Trace file")->required();
  replay->add_option("--alloc-conf", rpl.alloc_conf,
                     "Allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax (default: as recorded)");
  replay->add_option("--capacity", rpl.capacity,
                     "Device memory, e.g. 80GB (default: the recorded device's, else unlimited)");
  replay
      ->add_option("--memory-fraction", rpl.memory_fraction,
                   "torch.cuda.set_per_process_memory_fraction: cap reserved memory at this "
                   "share of the capacity")
      ->check(CLI::Range(0.0, 1.0));
  replay->add_option("--device", rpl.device, "Only this device (default: every device)");
  CLI::Option* replay_out =
      replay->add_option("-o,--output", rpl.output, "Write the replayed trace to this file");
  CLI::Option* replay_sweep =
      replay->add_flag("--sweep", rpl.sweep,
                       "Replay a grid of 24 settings (expandable segments, max_split_size_mb, "
                       "roundup_power2_divisions, garbage_collection_threshold) and rank them");
  replay_sweep->excludes(replay_out)->excludes(replay->get_option("--alloc-conf"));
  replay->add_option("--threads", rpl.threads, "Threads for --sweep (default: one per core)")
      ->check(kCount);
  replay->add_flag("--json", rpl.json, "Print JSON (docs/cli.md)");

  tc::PredictArgs prd;
  CLI::App* predict = command(
      app, "predict",
      "Will it fit? The peak at a size the program was not run at, from runs at two or more "
      "sizes (docs/predict.md)",
      "tidemark predict 16=b16.db 32=b32.db 64=b64.db --at 128,256 --capacity 80GiB");
  predict
      ->add_option("runs", prd.runs,
                   "Runs of one program as SIZE=FILE (a trace or a PyTorch snapshot), one per "
                   "value of the size that varies")
      ->required();
  predict->add_option("--at", prd.at, "Values to predict at, comma-separated")->required();
  predict->add_option("--capacity", prd.capacity,
                      "Device memory, e.g. 80GiB: whether each prediction fits, and the largest "
                      "size that does (default: the largest run's device, if recorded)");
  predict->add_option("--alloc-conf", prd.alloc_confs,
                      "Allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax (repeat to compare; "
                      "default: as the largest run was recorded)");
  predict->add_option("--device", prd.device,
                      "The device to predict (default: the largest run's busiest)");
  predict->add_option("--sites", prd.sites, "Sites listed per prediction")->check(kCount);
  predict->add_flag("--json", prd.json, "Print JSON (docs/cli.md)");

  tc::ReportArgs rep;
  CLI::App* report = command(
      app, "report",
      "One self-contained HTML file to send: timelines by category, the peak by category and "
      "site, steps, the allocator at the peak, the diagnoses and their fixes",
      "tidemark report run.db -o run.html");
  report->add_option("file", rep.file, "Trace file")->required();
  report->add_option("-o,--output", rep.output, "The HTML file to write")->required();
  report->add_option("--device", rep.device, "Only this device (default: every device)");

  CLI::App* mcp = command(
      app, "mcp",
      "A Model Context Protocol server on stdio: coding assistants open traces and snapshots "
      "and call summary, top, timeline, steps, diagnose, diff, replay and predict",
      "tidemark mcp   (an assistant's MCP config: {\"command\": \"tidemark\", \"args\": "
      "[\"mcp\"]})");

  tc::DiffArgs dif;
  CLI::App* diff = command(app, "diff", "What changed between two traces: peaks and sites",
                           "tidemark diff base.db new.db --json");
  diff->add_option("a", dif.a, "The base trace")->required();
  diff->add_option("b", dif.b, "The new trace")->required();
  CLI::Option* diff_limit =
      diff->add_option("--limit", dif.limit, "Sites listed per list (0: all)")->check(kCount);
  CLI::Option* diff_json = diff->add_flag("--json", dif.json, "Print JSON");
  diff->add_option("--by", dif.by, "Compare the allocated peak by site (default) or by source line")
      ->check(CLI::IsMember({"site", "line"}));
  diff->add_option("--file", dif.source,
                   "With --by line: the source file whose lines are compared");
  add_folded(diff, dif.folded,
             "Print the stacks live at each trace's allocated peak as differential folded "
             "lines (STACK A_BYTES B_BYTES) for flamegraph.pl's differential flame graphs",
             {diff_json, diff_limit});

  std::vector<std::string> imp_in;
  std::string imp_out, imp_onto;
  std::optional<int64_t> imp_rank;
  uint64_t imp_max_events = 0;
  CLI::App* import = command(app, "import",
                             "Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) "
                             "into a trace",
                             "tidemark import snapshot.pickle -o run.db");
  import
      ->add_option("snapshot", imp_in,
                   "The snapshot pickle (several: one per rank, the rank a number in each name)")
      ->required();
  import->add_option("--rank", imp_rank, "The rank of the process that took the snapshot")
      ->check(kCount);
  import->add_option("-o,--output", imp_out, "Trace file to write")->required();
  import->add_option("--onto", imp_onto,
                     "A trace recorded from the same run with `tidemark record` (CUDA injection): "
                     "write it with the snapshot's blocks lined up inside its segments");
  import
      ->add_option(
          "--max-events", imp_max_events,
          "Most trace entries, blocks and annotations the snapshot may expand to (default: one per "
          "16 bytes of the file, at least 1,000,000)")
      ->check(kCount);
  std::vector<std::string> merge_in;
  std::string merge_out;
  bool merge_json = false;
  CLI::App* merge = command(app, "merge",
                            "Merge the traces of a run's ranks into one trace, a device per rank "
                            "(rank1/cuda:0)",
                            "tidemark merge run-*.db -o all.db");
  merge->add_option("files", merge_in, "One trace per rank")->required();
  merge->add_option("-o,--output", merge_out, "Trace file to write")->required();
  merge->add_flag("--json", merge_json, "Print JSON (docs/cli.md)");

  std::string exp_in, exp_format, exp_out;
  CLI::App* exp =
      command(app, "export",
              "Write a trace as Chrome/Perfetto trace JSON, a CSV of allocations, or a PyTorch "
              "memory snapshot (pytorch.org/memory_viz)",
              "tidemark export run.db --format snapshot -o run.pickle");
  exp->add_option("file", exp_in, "Trace file")->required();
  exp->add_option("--format", exp_format, "chrome, csv or snapshot")
      ->required()
      ->check(CLI::IsMember({"chrome", "csv", "snapshot"}));
  exp->add_option("-o,--output", exp_out, "Output file (- for stdout)")->required();
  bool exp_no_categories = false;
  exp->add_flag("--no-categories", exp_no_categories,
                "snapshot: leave out the blocks' categories, as PyTorch's own snapshots do");

  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::vector<std::string>> command_after_dashes;
  if (!args.empty() &&
      (args.front() == "record" || args.front() == "estimate" || args.front() == "diagnose")) {
    auto dashes = std::find(args.begin(), args.end(), "--");
    if (dashes != args.end()) {
      command_after_dashes.emplace(dashes + 1, args.end());
      args.erase(dashes, args.end());
    }
  }
  if (!args.empty() && !args.front().empty() && args.front()[0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({}))
      known = known || sub->get_name() == args.front();
    if (!known) return fail("unknown command '" + args.front() + "'; see tidemark --help");
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed argument vector

  for (CLI::App* c : {summary, timeline, top, leaks, syncs, steps, check, diagnose, diff, replay,
                      predict, report})
    add_frames(c);
  // Custom categories (Note [Category rules]) where allocations are grouped by category.
  std::string categories;
  for (CLI::App* c : {summary, timeline, top, diff, report})
    c->add_option(
        "--categories", categories,
        "Custom categories: a JSON (or .yaml) file of ordered regex rules on frames "
        "(default: tidemark-categories.json or .yaml beside the trace, if any and yours)");
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return fail(e.what());
  }

  for (CLI::App* c : {summary, timeline, top, diff, report})
    if (*c) tc::use_category_rules(categories);
  try {
    if (*record) {
      std::vector<std::string> rest = record->remaining();
      if (command_after_dashes && !rest.empty())
        return fail("record: unexpected " + rest.front() + " before --");
      rec.command = command_after_dashes ? *command_after_dashes : rest;
      if (rec.command.empty())
        return fail("record: no command given; usage: tidemark record [-o FILE] -- CMD [ARGS...]");
      return tc::run_record(rec);
    }
    if (*estimate) {
      std::vector<std::string> rest = estimate->remaining();
      if (command_after_dashes && !rest.empty())
        return fail("estimate: unexpected " + rest.front() + " before --");
      est.command = command_after_dashes ? *command_after_dashes : rest;
      return tc::run_estimate(est);
    }
    if (*summary) {
      sum.file = sum.files.front();
      return sum.files.size() > 1 ? tc::run_summary_ranks(sum) : tc::run_summary(sum);
    }
    if (*info) return tc::run_info(info_file, info_json);
    if (*finalize) return tc::run_finalize(fin_file, fin_force);
    if (*timeline) return tc::run_timeline(tla);
    if (*top) return tc::run_top(top_args);
    if (*leaks) return tc::run_leaks(leak_args);
    if (*syncs) return tc::run_syncs(sync_args);
    if (*steps) return tc::run_steps(step_args);
    if (*watch) return tc::run_watch(wat);
    if (*check) {
      chk.file = chk.files.front();
      return tc::run_check(chk);
    }
    if (*diff) return tc::run_diff(dif);
    if (*diagnose) {
      if (dia_verify) {
        if (!dia.files.empty())
          return fail("diagnose --verify runs a program: give it after --, not a trace (" +
                      dia.files.front() + ")");
        dia.command = command_after_dashes ? *command_after_dashes : std::vector<std::string>{};
        return tc::run_diagnose(dia);
      }
      if (command_after_dashes) return fail("diagnose: a command after -- needs --verify");
      if (dia.files.empty()) return fail("diagnose: no trace given; usage: tidemark diagnose FILE");
      dia.file = dia.files.front();
      return dia.files.size() > 1 ? tc::run_diagnose_ranks(dia) : tc::run_diagnose(dia);
    }
    if (*merge) return tc::run_merge(merge_in, merge_out, merge_json);
    if (*replay) return tc::run_replay(rpl);
    if (*predict) return tc::run_predict(prd);
    if (*mcp) return tc::run_mcp();
    if (*report) return tc::run_report(rep);
    if (*import) return tc::run_import(imp_in, imp_out, imp_onto, imp_max_events, imp_rank);
    if (*exp) return tc::run_export(exp_in, exp_format, exp_out, exp_no_categories);
  } catch (const tc::UsageError& e) {
    return fail(e.what());
  } catch (const tidemark::store::StoreError& e) {
    return fail(e.what());
  } catch (const tidemark::analysis::OutputError& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    // Outputs are written beside their target and renamed at the end, and finalize builds the
    // derived tables in one transaction, so nothing was replaced half-written.
    std::string command = "tidemark";
    for (const CLI::App* c : app.get_subcommands()) command += " " + c->get_name();
    struct rlimit as {};
    std::string limit;
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
      limit = fmt::format(" (this process may use {} MiB: ulimit -v)", as.rlim_cur >> 20);
    return fail(
        command + ": out of memory" + limit +
        "; its outputs and the trace are left as they were, so it can run again with more memory");
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
  return fail("no command given; see tidemark --help");
}

// Out of memory so hard that an exception cannot even be made: libstdc++ takes an exception's
// memory from malloc, then from a small emergency pool, and with neither calls std::terminate
// (seen at ulimit -v 12704 KiB: "terminate called without an active exception"). That is out
// of memory too: one line, exit 2. Any other terminate is left to the default handler.
std::terminate_handler g_default_terminate = nullptr;
[[noreturn]] void on_terminate() {
  if (!std::current_exception()) {
    void* probe = std::malloc(64 << 10);
    if (!probe) {
      static const char kMessage[] =
          "tidemark: out of memory (not even an error could be made: ulimit -v?)\n";
      if (::write(STDERR_FILENO, kMessage, sizeof kMessage - 1) < 0) ::_exit(tc::kExitUsage);
      ::_exit(tc::kExitUsage);
    }
    std::free(probe);
  }
  if (g_default_terminate) g_default_terminate();
  std::abort();
}
// Before every other static initializer of the program: one of them may be what runs out.
[[gnu::constructor(101)]] void install_terminate_handler() {
  g_default_terminate = std::set_terminate(on_terminate);
}

// Note [Output that did not get out]
// Text and --json go to standard output; when it is a full disk (/dev/full), a file past its
// size limit or a closed pipe, what the command printed is incomplete, and an exit status of 0
// would let an empty report.json pass for a result. The stream is flushed and checked at exit:
// a failed write is exit 2, said on stderr. A file-size limit (ulimit -f) makes writes fail
// with EFBIG instead of killing the process (SIGXFSZ ignored), so outputs are left as they
// were and temporaries removed; `record` restores the default for the program it runs.
int main(int argc, char** argv) {
  std::signal(SIGXFSZ, SIG_IGN);
  int rc = tc::kExitUsage;
  try {
    rc = run_command(argc, argv);
  } catch (const std::bad_alloc&) {
    // Before a command runs (the command line's parser is built): no memory to name one.
    static const char kMessage[] =
        "tidemark: out of memory before the command could start (ulimit -v?)\n";
    if (::write(STDERR_FILENO, kMessage, sizeof kMessage - 1) < 0) return tc::kExitUsage;
    return tc::kExitUsage;
  }
  std::cout.flush();
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed && rc != tc::kExitUsage) {
    std::fprintf(stderr, "tidemark: writing to standard output failed: the output is incomplete\n");
    return tc::kExitUsage;
  }
  return rc;
}
