// Import of a PyTorch memory snapshot (the pickle `torch.cuda.memory._dump_snapshot()` writes)
// into a finalized Tidemark trace: segments and blocks (the state at the end), device_traces
// (alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
// segment_unmap, snapshot, oom) with their frames. The state at the start of the trace is
// rebuilt by walking the trace backwards from the final segments, as PyTorch's viewer does, and
// emitted first, so the curves and peaks are right even when the history started late.
// docs/importers.md says what maps to what.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/importers/import_error.h"
#include "profiler/store/trace_format.h"

namespace tidemark::store {
class TraceWriter;
}

namespace tidemark::importers {

// A private memory pool of an imported snapshot (Note [Private pools] in pytorch_snapshot.cpp):
// its segments and their bytes when the snapshot was taken.
struct PrivatePool {
  std::string device;                      // "cuda:0"
  std::pair<int64_t, int64_t> pool{0, 0};  // segment_pool_id
  uint64_t segments = 0, reserved_bytes = 0;
};

struct ImportStats {
  uint64_t events = 0;    // events written to the trace (synthetic start state and marks included)
  uint64_t segments = 0;  // segments in the snapshot's final `segments` (and `host_segments`)
  uint64_t frames = 0;    // distinct source frames (function, file, line)
  // Devices in the trace: cuda:N with segments or trace entries, and cpu:1 ("pinned host")
  // with host_segments or host_traces.
  int devices = 0;
  uint64_t annotations = 0;  // external_annotations written as scopes
  // Scopes from the entries' compile_context and user_metadata (Note [Entry contexts]): one per
  // run of entries with one value, more where annotations cut a run.
  uint64_t context_scopes = 0;
  uint64_t inferred_steps = 0;  // step events inferred from them (Note [Inferred steps])
  // Step events inferred from the optimizer's frames instead, or the backward's when the
  // optimizer left none to go by, or else from the repeated allocations of a loop
  // (`frame_steps_from`: "optimizer", "backward", "repetition"), when no annotation gave any
  // (Note [Inferred categories], rules 4 and 5).
  uint64_t frame_steps = 0;
  std::string frame_steps_from;
  bool synthetic_times = false;  // the snapshot had no times: events are in entry order
  // What the allocations' categories were inferred from (meta `categories_inferred`, Note
  // [Inferred categories]); empty when the snapshot named them or nothing was inferred.
  std::string categories_inferred;
  // What the importer tolerated, one line per kind ("3 frames whose 'line' is not a line
  // number (read as unknown)"): the CLI prints them on stderr (Note [Lenient fields]).
  std::vector<std::string> notes;
  // The snapshot's private pools (CUDA graphs, torch.cuda.MemPool), by device then pool; also
  // in meta `private_pools`.
  std::vector<PrivatePool> private_pools;
};

struct ImportOptions {
  // Most trace entries, blocks and annotations a snapshot may expand to; 0: one per 16 bytes of
  // pickle, at least a million (Note [Expansion bound]). `tidemark import --max-events`. Also
  // the most distinct frames kept, when above their own bound (Note [Frame bound]).
  uint64_t max_events = 0;
  // The rank of the process that took the snapshot (meta `rank`; `tidemark import --rank`, or
  // the number in the file's name when several ranks' snapshots are imported together).
  std::optional<int64_t> rank, world_size;
};

// Reads `pickle_path`, writes a finalized trace to `trace_path` (created or truncated). Throws
// ImportError, naming the file and the problem; a partly written `trace_path` is removed.
// `trace_path` is written without a journal (Note [Part files] in store/trace_writer.cpp):
// give it a part file to rename into place, as `tidemark import` does, where a killed import
// must not leave a broken file behind.
ImportStats import_pytorch_snapshot(const std::string& pickle_path, const std::string& trace_path,
                                    const ImportOptions& options = {});

// The same from the pickle's bytes; `source_name` names them in messages and in the trace's
// meta (command_line).
ImportStats import_pytorch_snapshot_data(std::string pickle_bytes, const std::string& trace_path,
                                         const std::string& source_name,
                                         const ImportOptions& options = {});

namespace detail {
// The conversion without the file around it (the fuzz target and tests use it): parses and
// checks the snapshot, then calls `open_writer` with the trace's meta and writes every event
// and stack node to the writer it returns (not closed, not finalized). `symbolize` receives the
// finalize symbolizer for the synthetic frame ids. Throws ImportError.
using OpenWriter = std::function<store::TraceWriter&(const store::TraceMeta&)>;
ImportStats convert_pytorch_snapshot(std::string pickle_bytes, const std::string& source_name,
                                     const OpenWriter& open_writer, store::SymbolizeFn* symbolize,
                                     uint64_t* end_ts_ns, const ImportOptions& options = {});
// The bytes of a snapshot file: a regular file starting with the pickle PROTO opcode (checked
// before the rest is read, so `/dev/zero` or a large file of another kind is refused at once).
// Throws ImportError naming the file and the problem.
std::string read_snapshot_file(const std::string& path);
// Removes a partly written trace (the file and its -wal, -shm and -journal companions).
void remove_trace(const std::string& path) noexcept;
// Inside a catch block: rethrows the exception being handled as an ImportError (a store error's
// message as it is; running out of memory naming `source_name`); anything else unchanged.
[[noreturn]] void rethrow_as_import_error(const std::string& source_name);
}  // namespace detail

}  // namespace tidemark::importers
