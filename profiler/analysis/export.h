// Exports of a finalized trace for other tools: Chrome Trace Event Format JSON (Perfetto,
// chrome://tracing) and a CSV of allocations (spreadsheets, pandas). docs/export.md describes
// both formats.
#pragma once

#include <iosfwd>
#include <string>

namespace tidemark::analysis {

/// Writes the trace at `trace_path` as Chrome Trace Event Format JSON to `out`: counter
/// tracks of allocated, active and reserved bytes per device (exact, from level 0 of the
/// level-of-detail table), scope slices per thread, steps as slices on a "steps" track,
/// syncs, marks, memcpys and allocator decisions (empty_cache, alloc_retry, oom) as instants,
/// and process / thread names. Times are microseconds since the trace's first event (the
/// origin the CLI's times use). The document is streamed, never held in memory.
///
/// Throws store::StoreError (naming the file) when the trace cannot be read or is not
/// finalized, std::runtime_error when writing to `out` fails.
void export_chrome(const std::string& trace_path, std::ostream& out);

/// Writes one CSV row per allocation (block lifetime) of the trace at `trace_path`, in
/// allocation order, with a header row: device, address, sizes, stream, pool, alloc and free
/// times in ns since the trace's first event, thread, scope path, category, stack id and
/// allocation site (function, file, line: the innermost symbolized frame outside Tidemark,
/// tensorlib and the standard libraries, as Note [Allocation site] in trace.h says). Fields
/// follow RFC 4180.
///
/// Throws as export_chrome does.
void export_csv(const std::string& trace_path, std::ostream& out);

}  // namespace tidemark::analysis
