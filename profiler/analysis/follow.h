// A trace still being recorded. The recorder appends event blocks and commits them every
// 50 ms or so in WAL mode (docs/recording.md), so a reader sees a growing file long before
// finalize builds the derived tables. LiveTrace reads the blocks committed since its last
// poll() (store::EventTail: a few cheap queries when nothing is new) and keeps the memory curves
// (allocated, active, reserved and requested per device, the statistics of docs/allocator.md,
// folded as Note [Memory curves] in profiler/events/events.h says) in memory, so a viewer
// extends its timeline without reading the trace again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/events/events.h"

namespace tidemark::analysis {

class LiveTrace {
 public:
  // Opens a trace, finalized or not. Throws store::StoreError naming the file when it is not
  // a Tidemark trace of this schema (corrupt, foreign, newer).
  explicit LiveTrace(const std::string& path);
  ~LiveTrace();
  LiveTrace(const LiveTrace&) = delete;
  LiveTrace& operator=(const LiveTrace&) = delete;

  // Reads the event blocks committed since the last call and adds their memory events to the
  // curves; returns the number of events read (0: nothing new).
  size_t poll();

  const std::string& path() const;
  uint64_t origin_ns() const;  // the first event's time (the recording start before any)
  uint64_t end_ns() const;     // the latest event's time so far
  uint64_t event_count() const;
  bool finalized() const;  // the recording ended and finalize built the derived tables
  // Devices in the order their first memory event was read: "cpu", "cuda:0".
  const std::vector<std::string>& devices() const;
  // Whether a device had an `alloc` event so far. A device with segments and none is a program
  // with its own caching allocator recorded by injection (PyTorch): reserved memory only.
  bool has_blocks(size_t device) const;
  // The highest allocated value of a device so far, and when it was first reached.
  std::optional<store::Peak> peak(size_t device) const;
  // The curves of a device over `width` columns, as analysis::timeline() gives them for a
  // finalized trace (min, max and last of each column), from the events read so far. Only
  // the curves: steps and peak_allocated stay empty.
  Timeline timeline(size_t device, const TimelineRequest& request) const;
  // Every change of a device's curves read so far, by time (ties by seq), with the curves
  // after it: what level 0 of the finalized trace's memory_lod holds.
  struct Change {
    uint64_t ts = 0, seq = 0;
    events::Curves after;
  };
  const std::vector<Change>& changes(size_t device) const;

  // The step events read so far (tl::profiler::step(), or a step range), by time: a step
  // runs from its event to the next one's (the last one to end_ns()).
  struct Step {
    int64_t number = 0;
    uint64_t ts = 0;
  };
  const std::vector<Step>& steps() const;
  // A device's memory over [from_ts, to_ts): the values at from_ts (after every change at or
  // before it), at the end (after every change before to_ts) and the highest in between.
  struct Window {
    int64_t allocated_start = 0, allocated_end = 0, allocated_peak = 0;
    int64_t reserved_start = 0, reserved_end = 0, reserved_peak = 0;
  };
  Window window(size_t device, uint64_t from_ts, uint64_t to_ts) const;
  // The growth (fit_growth, as `tidemark steps` judges it) of a device's live bytes at the
  // start of the last `window` of the first `done` steps (those that have ended: while
  // recording every step but the last). `reserved`: of its reserved bytes instead (a trace of
  // segments only: an injected PyTorch run).
  Growth step_growth(size_t device, size_t done, size_t window = 10, bool reserved = false) const;
  // The recording process, the process that finalizes the trace after it (`tidemark record`;
  // 0: the recording process itself) and their host (the trace's meta data), to tell a
  // recording still running or being finalized from one that ended without finalizing.
  int64_t pid() const;
  int64_t finalizer_pid() const;
  int64_t start_unix_ns() const;  // wall-clock start of the recording
  const std::string& host() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tidemark::analysis
