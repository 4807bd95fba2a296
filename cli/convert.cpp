// tidemark import and export: thin wrappers over profiler/importers and analysis/export.
#include <fmt/core.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/output_file.h"
#include "profiler/store/trace_writer.h"

#include "profiler/importers/lineup.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/analysis/export.h"
#include "profiler/analysis/units.h"

namespace tidemark::cli {

int run_import(const std::string& snapshot, const std::string& output, const std::string& onto,
               uint64_t max_events) {
  std::vector<std::string> inputs{snapshot};
  if (!onto.empty()) inputs.push_back(onto);
  analysis::OutputFile out(output, inputs);  // Note [Output files]
  importers::ImportStats s;
  importers::ImportOptions options;
  options.max_events = max_events;
  try {
    Progress p("importing " + snapshot);
    if (!onto.empty()) {
      importers::LineupStats l =
          importers::import_pytorch_snapshot_onto(snapshot, onto, out.part_path(), options);
      fmt::print(
          "{}: {} of {} snapshot segments matched recorded ones in {} (clock offset {} ns); "
          "{} recorded events kept\n",
          snapshot, l.matched_segments, l.snapshot_segments, onto, l.clock_offset_ns,
          l.recorded_events);
      s = l;
    } else {
      s = importers::import_pytorch_snapshot(snapshot, out.part_path(), options);
    }
  } catch (const importers::ImportError& e) {
    // The importer names the file it wrote; the user named another.
    std::string message = e.what();
    for (size_t at; (at = message.find(out.part_path())) != std::string::npos;)
      message.replace(at, out.part_path().size(), output);
    throw UsageError(message);
  }
  // The old trace's WAL, if one was left beside it, must not be replayed onto the new one.
  store::remove_trace_sidecars(output);
  out.commit();
  for (const std::string& note : s.notes) fmt::print(stderr, "tidemark: {}: {}\n", snapshot, note);
  fmt::print("{}: imported {} events, {} segments, {} devices into {}\n", snapshot, s.events,
             s.segments, s.devices, output);
  if (s.annotations) fmt::print("  {} annotations (record_function ranges) as scopes\n", s.annotations);
  if (s.inferred_steps) fmt::print("  {} steps inferred from the annotations\n", s.inferred_steps);
  if (s.frame_steps)
    fmt::print("  {} steps inferred from {}\n", s.frame_steps,
               s.frame_steps_from == "repetition" ? std::string("the repeated allocations of a loop")
                                                  : "the " + s.frame_steps_from + "'s frames");
  if (!s.categories_inferred.empty())
    fmt::print("  allocation categories inferred from {}\n", s.categories_inferred);
  for (const importers::PrivatePool& p : s.private_pools)  // Note [Private pools]
    fmt::print("  private pool ({}, {}) on {}: {} reserved in {} segments at the end\n", p.pool.first,
               p.pool.second, p.device, analysis::format_bytes(static_cast<int64_t>(p.reserved_bytes)),
               p.segments);
  if (s.synthetic_times)
    fmt::print("  the snapshot has no times (PyTorch before 2.1): events are numbered in order\n");
  return kExitOk;
}

int run_export(const std::string& file, const std::string& format, const std::string& output,
               bool no_categories) {
  if (no_categories && format != "snapshot")
    throw UsageError("--no-categories: only for --format snapshot");
  const analysis::Trace trace = open_trace(file);
  const std::optional<analysis::ExportFormat> parsed = analysis::parse_export_format(format);
  if (!parsed) throw UsageError("--format " + format + ": expected chrome, csv or snapshot");
  const analysis::ExportOptions options{*parsed, {.categories = !no_categories}};
  analysis::ExportResult result;
  {
    Progress p("exporting " + file);
    if (output == "-") {
      result = analysis::export_to(trace, std::cout, options);
      std::cout.flush();
      if (!std::cout) throw UsageError("-o -: cannot write the file");
    } else {
      result = analysis::export_to_file(trace, output, options);  // Note [Output files]
    }
  }
  if (output != "-") fmt::print(stderr, "tidemark: wrote {}\n", output);
  const std::optional<analysis::SnapshotExport>& snapshot = result.snapshot;
  if (snapshot) {
    // Which device is which in the viewer's device list, and what could not be shown.
    std::string devices;
    for (const auto& d : snapshot->devices)
      devices += fmt::format("{}{} is device {} ({} entries)", devices.empty() ? "" : ", ", d.name,
                             d.index, d.entries);
    fmt::print(stderr, "tidemark: snapshot: {}; {} segments, {} blocks at the end\n",
               devices.empty() ? "no devices" : devices, snapshot->segments, snapshot->blocks);
    if (snapshot->entries_left_out > 0)
      fmt::print(stderr,
                 "tidemark: snapshot: left out {} trace entries of blocks in memory reserved "
                 "before the recording started (the viewer needs a segment around every block)\n",
                 snapshot->entries_left_out);
    if (snapshot->entries_dropped + snapshot->entries_restored > 0)
      fmt::print(stderr,
                 "tidemark: snapshot: the recording dropped events: {} entries of unknown blocks "
                 "left out, {} frees and releases restored where they must have happened\n",
                 snapshot->entries_dropped, snapshot->entries_restored);
  }
  return kExitOk;
}

}  // namespace tidemark::cli
