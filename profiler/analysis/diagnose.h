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

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

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
// Every detector, in a fixed order: this library's, then those added by add_detector.
std::vector<DetectorInfo> detectors();

// A detector from a library built on this one (the replay's `allocator-settings`, which runs
// the trace through the caching allocator): programs that link it add it once at startup, so
// the CLI and the GUI run the same detectors. `info.id` must outlive the program (a literal).
// Adding an id twice keeps the first.
void add_detector(DetectorInfo info, std::function<void(const Trace& trace, Diagnosis& out)> fn);

// Runs the detectors (all, or those in `only`; an unknown id throws std::invalid_argument
// listing the known ones), sets each finding's severity and share (Note [Severity]) and ranks
// them: by severity, then by share. Minor findings are left out (counted in minor_hidden)
// unless `include_minor`.
Diagnosis diagnose(const Trace& trace, const std::set<std::string>& only = {},
                   bool include_minor = false);

namespace detail {
// One detector: appends its findings, or a SkippedDetector saying why it could not run.
using DetectorFn = void (*)(const Trace& trace, Diagnosis& out);

// A finding that rests on inferred categories or steps (an imported snapshot: Note [Inferred
// categories] in profiler/importers/infer.cpp, Note [Inferred steps]) says so in its evidence.
void note_inferred(const Trace& trace, Finding& f);

// Why the detectors of activations cannot run on `trace`, or empty when they can. `backward`:
// the detector needs the autograd engine's `backward` scopes, which an imported snapshot never
// has (diagnose_memory.cpp).
std::string activations_missing(const Trace& trace, bool backward);
// Note [State-only snapshots]: a snapshot taken without a recorded history (PyTorch's
// `_snapshot()` with history off, `memory_snapshot()`, or a history whose entries were all
// dropped) holds the blocks and segments of one moment and no allocation after it. It says
// what holds memory then (from the blocks' frames), never what the memory was over time: its
// "peak" is that moment, so a detector that compares a peak with anything (fragmentation's
// reserved against the most ever allocated) or measures a duration skips such a device.
// True for a device of an imported snapshot on which nothing was allocated after the
// snapshot's start state.
bool state_only(const Trace& trace, int64_t device);

// Note [Phases of the window]: what the recorded window does, which decides which advice fits
// (checkpointing only where backward runs; no_grad where a forward saves for a backward that
// never comes). A tensorlib trace says it with the engine's `backward` scopes, which its
// detectors read themselves; an imported snapshot with the phase runs the importer inferred
// from its frames (meta categories_inferred, "phase runs: 1 forward, 1 backward, ..."; Note
// [Inferred categories] in profiler/importers/infer.cpp), which window_phases reads. `known`
// is false for a recorded trace and for a snapshot without inferred phases.
struct WindowPhases {
  bool known = false;
  bool forward = false, backward = false, optimizer = false;
};
WindowPhases window_phases(const Trace& trace);
// The phase a finding's evidence names from them: "training (backward runs in the window)",
// "forward only (no backward runs in the window)", or empty when the phases are not known.
std::string phase_label(const WindowPhases& phases);

// Whether graph-retention fires on `device` (Note [The more specific finding] in
// diagnose_memory.cpp).
bool graph_retention_on(const Trace& trace, int64_t device);

// Note [Checkpointing estimate] (diagnose_activations.cpp): layers in forward order, each with
// its activation bytes at the peak and its largest block (the output a segment would keep).
struct CheckpointLayer {
  int64_t bytes = 0, largest_block = 0;
};
struct CheckpointEstimate {
  size_t k = 0, segments = 0;        // 0: no segmentation saves anything
  int64_t before = 0, after = 0;     // activation bytes at the peak without and with it
  int64_t outputs = 0, largest = 0;  // after = outputs kept + the largest segment
};
CheckpointEstimate checkpoint_estimate(const std::vector<CheckpointLayer>& layers);

// diagnose_memory.cpp
void detect_leak(const Trace& trace, Diagnosis& out);
void detect_graph_retention(const Trace& trace, Diagnosis& out);
void detect_retained_graph(const Trace& trace, Diagnosis& out);
void detect_grad_in_eval(const Trace& trace, Diagnosis& out);
void detect_sync_in_loop(const Trace& trace, Diagnosis& out);
// diagnose_allocator.cpp
void detect_view_retention(const Trace& trace, Diagnosis& out);
void detect_copy_instead_of_view(const Trace& trace, Diagnosis& out);
void detect_fragmentation(const Trace& trace, Diagnosis& out);
void detect_oom(const Trace& trace, Diagnosis& out);
void detect_cache_held(const Trace& trace, Diagnosis& out);
void detect_pinned_growth(const Trace& trace, Diagnosis& out);
// diagnose_activations.cpp
void detect_activation_peak(const Trace& trace, Diagnosis& out);
// diagnose_optimizer.cpp, diagnose_hooks.cpp, diagnose_cache_thrash.cpp, diagnose_devices.cpp
void detect_optimizer_peak(const Trace& trace, Diagnosis& out);
void detect_hook_leak(const Trace& trace, Diagnosis& out);
void detect_cache_thrash(const Trace& trace, Diagnosis& out);
void detect_device_imbalance(const Trace& trace, Diagnosis& out);
// diagnose_attention.cpp
void detect_attention_peak(const Trace& trace, Diagnosis& out);
// diagnose_autocast.cpp, diagnose_grads.cpp
void detect_autocast_cache(const Trace& trace, Diagnosis& out);
void detect_stale_grads(const Trace& trace, Diagnosis& out);

// Note [Autocast weight copies] (diagnose_autocast.cpp): of allocations live at one moment,
// autocast's 16-bit copies of float32 weights (`seqs`: their allocations' seq), their bytes, the
// largest one's stack, and the bytes of autocast's casts of activations beside them. grad-in-eval
// leaves the copies out of what no_grad would free: the cache lives for the autocast region.
struct AutocastCopies {
  std::set<uint64_t> seqs;
  int64_t bytes = 0, activation_bytes = 0;
  uint64_t largest_stack = 0;
};
AutocastCopies autocast_weight_copies(const Trace& trace,
                                      const std::vector<store::AllocationRow>& live);
}  // namespace detail

}  // namespace tidemark::analysis
