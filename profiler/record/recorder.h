// The recorder: a Sink that copies every event into a per-thread ring buffer, and a writer
// thread that drains the rings (Note [Recorder rings] in recorder.cpp) into a SQLite trace
// (profiler/store). The hot path never waits on I/O; memory is bounded by the rings; a full
// ring makes its producer wait for the writer (back-pressure), and events that cannot be
// written are counted in the trace as dropped.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/events/annotate.h"

namespace tidemark::record {

struct Options {
  std::string path;      // the trace file: %p the pid, %r the rank, %% a % (Note [Output patterns])
  int stack_depth = 0;   // native frames per stack: 0 (off) to 64
  bool tensors = true;   // record storage and tensor births and deaths
  bool finalize = true;  // build the derived tables when recording stops
  bool force = false;  // replace a regular file at `path` that is not a trace (never another kind)
  size_t ring_bytes = 4 << 20;  // per-thread buffer (power of two, >= 64 KiB)
  std::string command_line;     // default: this process's /proc/self/cmdline
};

// Options from the environment, as `tidemark record` sets it: TIDEMARK_OUTPUT (path; empty
// means "do not record"), TIDEMARK_STACKS (depth, 0-64), TIDEMARK_TENSORS (0/1),
// TIDEMARK_FINALIZE (0/1), TIDEMARK_FORCE (0/1), TIDEMARK_BUFFER_KB. Throws std::invalid_argument
// naming a bad variable and value.
Options options_from_env();

struct RecordingStats {
  uint64_t events = 0;   // written to the trace
  uint64_t dropped = 0;  // counted, not written
  uint64_t stacks = 0;   // distinct stack nodes
};

// Starts recording this process into options.path. Throws std::runtime_error (naming the file
// and the problem) when the file cannot be created or a recording is already running.
void start(const Options& options);
// Stops: drains every buffer, commits, closes and (with options.finalize) finalizes the trace,
// symbolizing stacks. Safe to call when not recording. Returns what was recorded.
RecordingStats stop();
bool is_recording();
// Waits until the writer has taken everything this process emitted before the call, and with
// `commit` until it is committed to the file.
void flush(bool commit = true);

// Finalizes a trace written earlier (a crashed run, or one recorded with finalize off),
// symbolizing its stacks from the module list stored in it; a trace of an older schema that
// store::finalize upgrades is upgraded. Throws store::StoreError.
void finalize_trace(const std::string& path);

}  // namespace tidemark::record

// The tensorlib-facing spelling: tl::profiler::start(path, options), Scope, step(), mark().
namespace tl::profiler {
using Options = tidemark::record::Options;
using tidemark::events::mark;
using tidemark::events::Scope;
using tidemark::events::step;
inline void start(const std::string& path, Options options = {}) {
  options.path = path;
  tidemark::record::start(options);
}
inline tidemark::record::RecordingStats stop() {
  return tidemark::record::stop();
}
}  // namespace tl::profiler
