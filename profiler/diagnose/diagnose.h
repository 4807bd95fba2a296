// Diagnoses: detectors that name the classic memory pitfalls in a trace -- what is wrong,
// the evidence (bytes, counts, times), the code site responsible, and the fix -- the way a
// senior engineer reading the timeline would (docs/diagnoses.md). `tidemark diagnose` and
// the GUI's summary both call diagnose(), so they always agree.
//
// Each detector has a stable id (the contract of `--only`, `check --no-findings` and the JSON
// output). A detector that needs data the trace lacks (tensor records in an imported
// snapshot, syncs in a trace without them) reports itself as skipped with the reason, instead
// of staying silent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::diagnose {

// Note [Severity]
// What a finding puts at stake, against the run: its bytes against the device's peak reserved
// memory (what the run took from the device; the peak allocated where nothing was reserved),
// or its host time against the run's duration. That share ranks the findings and sets their
// severity:
//   major     bytes >= kMajorMemoryShare of the peak, or time >= kMajorTimeShare of the run
//   moderate  bytes >= kModerateMemoryShare, or time >= kModerateTimeShare
//   minor     below: real, but nothing a user would act on for this run (a sync-in-loop that
//             waits microseconds on the CPU, a few-percent copy); diagnose() leaves minor
//             findings out unless asked for them (`tidemark diagnose --all`).
// A detector may set a higher severity itself, which diagnose() keeps: an `oom` is major,
// whatever its request, because the run failed there.
//
// Memory is major only where it decides whether the run fits: on a device that ran out of
// memory in the trace (an `oom`, or an `alloc_retry`: a failed device allocation the allocator
// got past by flushing its cache), or whose peak reserved is at least kNearCapacityShare of
// its known capacity. Elsewhere -- a run that fits with room to spare, or a device whose
// capacity the trace does not know and which never ran out (a PyTorch snapshot's) -- a memory
// share of kMajorMemoryShare or more is moderate: worth acting on to grow the batch or the
// model, but this run is not in danger (a 1.15 GiB toy's activations, a DataParallel replica's
// 7.88 GiB on an 80 GB device).
enum class Severity : uint8_t { minor, moderate, major };
std::string_view severity_name(Severity s);  // "minor", "moderate", "major"
inline constexpr double kMajorMemoryShare = 0.25, kModerateMemoryShare = 0.05;
inline constexpr double kMajorTimeShare = 0.10, kModerateTimeShare = 0.01;
inline constexpr double kNearCapacityShare = 0.90;

struct Finding {
  std::string id;        // detector id: "graph-retention", "sync-in-loop", ...
  std::string title;     // one line: what is wrong ("activations survive backward and grow ...")
  std::string device;    // "cpu", "cuda:0"
  int64_t bytes = 0;     // memory at stake (ranking), 0 when the finding is about time
  uint64_t time_ns = 0;  // host time at stake (waits), 0 when about memory
  // The code site responsible: Note [Allocation site]'s label ("main (train.cpp:42)") and
  // the stack it comes from (innermost first). Empty when the trace has no stacks.
  std::string site;
  std::vector<std::string> stack;
  // The numbers behind the finding, as (what, value) in display form:
  // {"growth per step", "2.26 MiB (2,374,656 bytes)"}, {"steps", "20"}.
  std::vector<std::pair<std::string, std::string>> evidence;
  std::string fix;  // what to do, one or two sentences
  // Note [Severity]: set by diagnose() (a detector may set a floor); `share` is the stake
  // against the device's peak reserved or the run's duration (0.25: a quarter of it).
  Severity severity = Severity::minor;
  double share = 0;
};

struct SkippedDetector {
  std::string id;
  std::string reason;  // "the trace has no tensor records (imported snapshot)"
};

struct Diagnosis {
  std::vector<Finding> findings;         // ranked: most at stake against the run first
  std::vector<SkippedDetector> skipped;  // detectors that could not run on this trace
  size_t minor_hidden = 0;               // minor findings left out (Note [Severity])
};

struct DetectorInfo {
  std::string_view id;
  std::string_view pitfall;  // one line: the pitfall it names
};
// Every detector, in a fixed order (diagnose.cpp's list).
std::vector<DetectorInfo> detectors();

// Runs the detectors (all, or those in `only`; an unknown id throws std::invalid_argument
// listing the known ones), sets each finding's severity and share (Note [Severity]) and ranks
// them: by severity, then by share. Minor findings are left out (counted in minor_hidden)
// unless `include_minor`.
Diagnosis diagnose(const analysis::Trace& trace, const std::set<std::string>& only = {},
                   bool include_minor = false);

}  // namespace tidemark::diagnose
