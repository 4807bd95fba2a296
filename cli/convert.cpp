// tidemark import and export: thin wrappers over profiler/importers and analysis/export.
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/output_file.h"
#include "profiler/store/trace_writer.h"

#include "profiler/analysis/export.h"
#include "profiler/analysis/merge.h"
#include "profiler/importers/lineup.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace {

// Several ranks' snapshots (Note [Several ranks] in cli/ranks.cpp): each imported on its own
// with its rank (the number in its name), then merged as `tidemark merge` merges traces.
int import_ranks(const std::vector<std::string>& snapshots, const std::string& output,
                 uint64_t max_events) {
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const std::string& s : snapshots) {
    std::optional<int64_t> rank;
    try {
      rank = analysis::rank_from_file_name(s);
    } catch (const analysis::MergeError& e) {
      throw UsageError(e.what());
    }
    if (!rank)
      throw UsageError(s +
                       ": no rank in its name (snapshot_rank3.pickle, rank-1.pickle); import "
                       "it alone with --rank N");
    for (const auto& [r, other] : ranked)
      if (r == *rank)
        throw UsageError(other + " and " + s + ": both are rank " + std::to_string(r) +
                         " by their names; give each rank's snapshot once");
    ranked.emplace_back(*rank, s);
  }
  analysis::OutputFile out(output, snapshots);  // Note [Output files]
  std::vector<std::string> temps, names;
  struct Cleanup {
    std::vector<std::string>* paths;
    ~Cleanup() {
      for (const std::string& p : *paths) {
        std::error_code ec;
        for (const char* side : {"", "-wal", "-shm", "-journal"})
          std::filesystem::remove(p + side, ec);
      }
    }
  } cleanup{&temps};
  analysis::MergeResult merged;
  try {
    for (const auto& [rank, snapshot] : ranked) {
      Progress p("importing " + snapshot);
      importers::ImportOptions options;
      options.max_events = max_events;
      options.rank = rank;
      temps.push_back(out.part_path() + ".rank" + std::to_string(rank));
      names.push_back(snapshot);
      importers::ImportStats s =
          importers::import_pytorch_snapshot(snapshot, temps.back(), options);
      fmt::print("{}: rank {}: imported {} events, {} segments, {} devices\n", snapshot, rank,
                 s.events, s.segments, s.devices);
    }
    Progress p("merging " + std::to_string(temps.size()) + " ranks");
    merged = analysis::merge_ranks(temps, out.part_path(), names);
  } catch (const importers::ImportError& e) {
    throw UsageError(e.what());
  } catch (const analysis::MergeError& e) {
    throw UsageError(e.what());
  }
  store::remove_trace_sidecars(output);
  out.commit();
  for (const std::string& w : merged.warnings) fmt::print(stderr, "tidemark: warning: {}\n", w);
  std::string devices;
  for (const analysis::MergedRank& r : merged.ranks)
    for (const std::string& d : r.devices) devices += (devices.empty() ? "" : ", ") + d;
  fmt::print("merged {} ranks ({} events) into {}: {}\n", merged.ranks.size(), merged.events,
             output, devices);
  return kExitOk;
}

}  // namespace

int run_import(const std::vector<std::string>& snapshots, const std::string& output,
               const std::string& onto, uint64_t max_events, std::optional<int64_t> rank) {
  if (snapshots.size() > 1) {
    if (!onto.empty()) throw UsageError("--onto: takes one snapshot; import the ranks' one by one");
    if (rank)
      throw UsageError("--rank: for one snapshot; several take their ranks from their names");
    return import_ranks(snapshots, output, max_events);
  }
  const std::string& snapshot = snapshots.front();
  std::vector<std::string> inputs{snapshot};
  if (!onto.empty()) inputs.push_back(onto);
  analysis::OutputFile out(output, inputs);  // Note [Output files]
  importers::ImportStats s;
  importers::ImportOptions options;
  options.max_events = max_events;
  options.rank = rank;
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
  if (s.annotations)
    fmt::print("  {} annotations (record_function ranges) as scopes\n", s.annotations);
  if (s.inferred_steps) fmt::print("  {} steps inferred from the annotations\n", s.inferred_steps);
  if (s.frame_steps)
    fmt::print("  {} steps inferred from {}\n", s.frame_steps,
               s.frame_steps_from == "repetition"
                   ? std::string("the repeated allocations of a loop")
                   : "the " + s.frame_steps_from + "'s frames");
  if (!s.categories_inferred.empty())
    fmt::print("  allocation categories inferred from {}\n", s.categories_inferred);
  for (const importers::PrivatePool& p : s.private_pools)  // Note [Private pools]
    fmt::print("  private pool ({}, {}) on {}: {} reserved in {} segments at the end\n",
               p.pool.first, p.pool.second, p.device,
               analysis::format_bytes(static_cast<int64_t>(p.reserved_bytes)), p.segments);
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
