// Exports of a finalized trace for other tools: Chrome Trace Event Format JSON (Perfetto,
// chrome://tracing), a CSV of allocations (spreadsheets, pandas) and a PyTorch memory
// snapshot (PyTorch's memory_viz, torch.cuda.memory tooling). docs/export.md describes the
// formats.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark::analysis {

class Trace;

/// Writes `trace` as Chrome Trace Event Format JSON to `out`: counter
/// tracks of allocated, active and reserved bytes per device (exact, from level 0 of the
/// level-of-detail table), scope slices per thread, steps as slices on a "steps" track,
/// syncs, marks, memcpys and allocator decisions (empty_cache, alloc_retry, oom) as instants,
/// and process / thread names. Times are microseconds since the trace's first event (the
/// origin the CLI's times use). The document is streamed, never held in memory.
///
/// Reads through the trace's connection (a Trace is used by one thread at a time). Throws
/// store::StoreError (naming the file) when the trace cannot be read, std::runtime_error when
/// writing to `out` fails.
void export_chrome(const Trace& trace, std::ostream& out);

/// Writes one CSV row per allocation (block lifetime) of `trace`, in
/// allocation order, with a header row: device, address, sizes, stream, pool, alloc and free
/// times in ns since the trace's first event, thread, scope path, category, stack id and
/// allocation site (function, file, line: the innermost symbolized frame outside Tidemark,
/// tensorlib and the standard libraries, as Note [Allocation site] in trace.h says). Fields
/// follow RFC 4180.
///
/// Throws as export_chrome does.
void export_csv(const Trace& trace, std::ostream& out);

// What export_snapshot wrote.
struct SnapshotExport {
  struct Device {
    std::string name;  // "cpu", "cuda:0"
    int index = 0;     // its index in the snapshot (`device`, `device_traces[index]`)
    uint64_t entries = 0;
  };
  std::vector<Device> devices;
  uint64_t entries = 0;   // trace entries, all devices
  uint64_t segments = 0;  // segments reserved at the end
  uint64_t blocks = 0;    // blocks allocated or pending free at the end
  // Entries left out (Note [Snapshot export] in export_snapshot.cpp): of blocks in memory the
  // trace never saw reserved (the recording started after it was reserved), and of blocks the
  // history does not know (the recording dropped events).
  uint64_t entries_left_out = 0;
  uint64_t entries_dropped = 0;
  // Entries restored where the recording dropped them: the frees of blocks whose memory was
  // allocated again or released, and the release of memory reserved again.
  uint64_t entries_restored = 0;
};

/// Writes `trace` as a PyTorch memory snapshot (the pickle
/// `torch.cuda.memory._dump_snapshot` writes; docs/export.md, "PyTorch memory snapshot"), so
/// https://pytorch.org/memory_viz and other snapshot tools open it: `device_traces` with every
/// alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
/// segment_unmap and oom, in order, with the host stack of each as `frames` (innermost first)
/// and, when the trace has categories, each block's `category`; and `segments` as that history
/// leaves them, with their blocks (the two always agree: Note [Snapshot export]). cuda:N is
/// device N; the CPU is the device after the last CUDA one (0 when there is none). Pickle
/// protocol 4 with only the opcodes memory_viz's own unpickler reads, lists in batches of
/// 1000; frames lists and repeated strings are memoized, as Python's pickler does. Streamed:
/// memory holds the distinct stacks and the blocks live at one time, not the events.
///
/// Throws as export_chrome does.
struct SnapshotExportOptions {
  // Write each block's `category` when the trace has categories. false: leave them out, as
  // PyTorch's own snapshots do (`tidemark export --no-categories`: what `tidemark import`
  // then infers can be held against what the trace recorded).
  bool categories = true;
};
SnapshotExport export_snapshot(const Trace& trace, std::ostream& out,
                               const SnapshotExportOptions& options = {});

// ---- One export, by format ------------------------------------------------------------------
// What `tidemark export --format` and the GUI's File > Export offer.

enum class ExportFormat : uint8_t { chrome, csv, snapshot };
std::string_view export_format_name(ExportFormat format);  // "chrome", "csv", "snapshot"
std::optional<ExportFormat> parse_export_format(std::string_view name);

struct ExportOptions {
  ExportFormat format = ExportFormat::chrome;
  SnapshotExportOptions snapshot;  // for ExportFormat::snapshot
};

struct ExportResult {
  std::optional<SnapshotExport> snapshot;  // what a snapshot export wrote
};

// Writes `trace` to `out` in options.format. Throws as export_chrome does.
ExportResult export_to(const Trace& trace, std::ostream& out, const ExportOptions& options);

// Writes `trace` into the file `path` in options.format, as every output is written (Note
// [Output files]): refused when `path` is the trace itself, written to a temporary beside it
// and renamed into place once complete, so a failed export leaves no partial file and `path`
// as it was. Throws OutputError (output_file.h: the output is the trace, or cannot be
// written; the message names the file and the problem), store::StoreError (the trace cannot be
// read). An export on a thread of its own (the GUI's) opens a Trace of its own for it.
ExportResult export_to_file(const Trace& trace, const std::string& path,
                            const ExportOptions& options);

}  // namespace tidemark::analysis
