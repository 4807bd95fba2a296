// TraceWriter: appends a recording to a SQLite trace file. Used by one thread (the recorder's
// writer thread). Raw events are stored compactly (blocks of delta-encoded events); the
// queryable tables are built later by finalize().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/store/trace_format.h"

namespace tidemark::store {

// How a trace file is written (Note [Part files] in trace_writer.cpp).
enum class Journal {
  wal,   // a recording others may read while it grows, kept by a killed process
  none,  // a part file no one reads until it is renamed into place, complete (an import)
};

// Note [Counted losses]
// ~~~~~~~~~~~~~~~~~~~~~
// A trace's `dropped_count` is every event lost only when nothing could be lost after it was
// stored: the recording closed its file (`clean_end`), or its writer failed and stored the
// final count when the recording stopped (`abandon(..., last)`: meta `loss_counted` 1). A
// process killed mid-run loses what it emitted since its last commit, and a writer that
// failed on a full disk may find no room left for the count: neither can store a number, so
// the file says so by what it lacks, and readers (`TraceReader::loss_counted`) report "at
// least N dropped, more uncounted" rather than a count that is too low. A merged trace is
// counted when every rank's is (meta `loss_counted` 0 otherwise).

class TraceWriter {
 public:
  // Creates (or truncates) `path`, writes the schema and `meta`, in WAL mode (with
  // Journal::none, without a journal until finalize makes it WAL). Throws StoreError, and then
  // leaves nothing at `path`.
  static std::unique_ptr<TraceWriter> create(const std::string& path, const TraceMeta& meta,
                                             Journal journal = Journal::wal);
  virtual ~TraceWriter() = default;

  // Appends one event. `stack_id` is a node added by add_stack_node (0: no stack). Spans and
  // strings in `e` are copied (interned) before returning.
  virtual void append(const events::Event& e, uint64_t stack_id) = 0;
  // A node of the stacks prefix tree: `parent` is 0 for an outermost frame, `ip` the return
  // address. Nodes are added before any event refers to them.
  virtual void add_stack_node(uint64_t id, uint64_t parent, uint64_t ip) = 0;
  virtual void add_modules(const std::vector<ModuleInfo>& modules) = 0;
  // `count` events were dropped (the writer fell behind): stored, never silent.
  virtual void add_dropped(uint64_t count, uint64_t ts_ns) = 0;
  // Writes buffered events and commits. The recorder calls it about every 50 ms
  // (docs/recording.md); a killed process loses what came after its last call.
  virtual void commit() = 0;
  // Commits and records a clean end (end time, event count). The file stays unfinalized.
  virtual void close(uint64_t end_ts_ns) = 0;
  // The recording cannot go on (a call above threw: a full disk, a database another process
  // held locked for longer than the writer waits). Discards what was not committed and, if the
  // file can still be written, records `dropped` more events lost at `ts_ns` and why (meta
  // `writer_error`); the file keeps no clean end. May be called again to add more; nothing
  // else may. `last`: nothing more will be lost, the count is final (meta `loss_counted`,
  // Note [Counted losses]). Throws StoreError when even that cannot be written (by default:
  // writers that are not files, such as an importer's collector, have nowhere to record it).
  virtual void abandon(uint64_t dropped, uint64_t ts_ns, const std::string& reason,
                       bool last = false);
};

// Removes the files SQLite keeps beside a trace (`-wal`, `-shm`, `-journal`), so that a new
// file put at `path` never gets an old one's write-ahead log replayed onto it. Throws
// StoreError.
void remove_trace_sidecars(const std::string& path);

struct FinalizeOptions {
  SymbolizeFn symbolize;  // null: frames keep only their addresses
  // Journal::none: the file is a part file its writer made with Journal::none; finalize
  // writes it without a journal too and leaves it in WAL mode, as every finished trace is.
  Journal journal = Journal::wal;
};

// Builds the derived tables (allocations, segments, tensors, syncs, scopes, steps, the
// level-of-detail pyramid, symbolized frames) from the raw events. Idempotent: rerunning it
// rebuilds them, so a crashed, unfinalized file can be finalized later. A trace of an older
// schema it can upgrade (kOldestUpgradableSchemaVersion on) is made current: derived tables
// rebuilt, version set to kSchemaVersion. Throws StoreError.
void finalize(const std::string& path, const FinalizeOptions& options = {});

}  // namespace tidemark::store
