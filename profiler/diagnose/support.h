// What several detectors share (profiler/diagnose/*.cpp, one file per finding id): the trace
// read as they read it -- steps, blocks, tensors, segments, the phases of a snapshot's window --
// and the words of their evidence. Internal: callers see diagnose.h; a helper one detector uses
// stays in its file.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/site_rule.h"
#include "profiler/naming/units.h"
#include "profiler/store/allocator_tables.h"
#include "tensorlib/memory/sizes.h"

namespace tidemark::diagnose::detail {

// What the detectors read a trace through (profiler/analysis, profiler/naming).
using analysis::DeviceRef;
using analysis::fit_growth;
using analysis::format_bytes;
using analysis::format_duration;
using analysis::Group;
using analysis::group_allocations;
using analysis::GroupBy;
using analysis::Growth;
using analysis::is_autograd_engine_frame;
using analysis::live_allocations;
using analysis::live_at;
using analysis::LiveBreakdown;
using analysis::peak;
using analysis::peak_point;
using analysis::qualified_name;
using analysis::Site;
using analysis::steps_of;
using analysis::StepSpan;
using analysis::TimePoint;
using analysis::Trace;

// ---- the words of the evidence --------------------------------------------------------------

// "4.00 MiB (4,194,304 bytes)"
std::string bytes_text(int64_t bytes);
// "2.50x"
std::string ratio_text(double r);
// "0.97" (an r², syncs per step)
std::string fixed2(double v);

// Fills a finding's site and stack from a stack id (Note [Allocation site]); both stay empty
// for 0 (no stacks recorded).
void set_site(const Trace& trace, uint64_t stack_id, Finding& f);

// A device's name, "device N" when the trace does not list it.
std::string device_label(const Trace& trace, int64_t device_id);

// A finding that rests on inferred categories or steps (an imported snapshot: Note [Inferred
// categories] in profiler/importers/infer.cpp, Note [Inferred steps]) says so in its evidence.
void note_inferred(const Trace& trace, Finding& f);

// ---- what a snapshot's window holds -----------------------------------------------------------

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

// Note [A training forward]: a training program's snapshot dumped between a forward and its
// `loss.backward()` (a profiler stopped early, a dump at the peak) holds a forward with grad
// mode on and no backward, as an evaluation does -- but its window starts with the training's
// state live: gradients, or an optimizer's moments and momentum buffers (inferred from the
// blocks' sizes where they were made before the history: Note [State before the history] in
// profiler/importers/infer.cpp). Advice to run that forward under no_grad would break the
// training, so grad-in-eval skips such a device and says why, and kept-graph reads a graph
// kept then as a training program's. What it cannot see: a program
// with plain SGD (no state) whose gradients were freed before the forward.
bool trains(const Trace& trace, int64_t device);

// ---- steps and blocks: graph-retention, retained-graph, grad-in-eval, leak, sync-in-loop ----

// Note [Activations in the trace]
// tensorlib marks a block `activation` when autograd saves a tensor in it for backward
// (Note [Autograd memory categories] in tensorlib/autograd/node.cpp), and the engine runs
// backward inside a scope named "backward" or "backward(retain_graph)". An allocation row's
// category is the block's latest one while it was allocated, so a parameter saved by a graph
// that died without backward stays `activation` for its whole life: the detectors look at
// *when* activation blocks live (across step boundaries, across a backward), never at the
// category alone.

inline constexpr uint64_t kOpen = ~uint64_t{0};  // an end time that never came (NULL in the trace)

// Why the detectors of activations cannot run on `trace`, or empty when they can. `backward`:
// the detector needs the autograd engine's `backward` scopes, which an imported snapshot never
// has.
std::string activations_missing(const Trace& trace, bool backward);

struct Step {
  int64_t number = 0;
  uint64_t ts = 0, end_ts = kOpen;  // end_ts: the next step's start; kOpen for the last
};
// Every step, or a device's (its rank's in a merged trace: Note [Steps of a rank]).
std::vector<Step> load_steps(const Trace& t, std::optional<int64_t> device = std::nullopt);
inline constexpr const char* kNoSteps =
    "the trace has no steps (mark each iteration with tl::profiler::step()), so a loop cannot "
    "be told apart from the rest of the program";

struct Block {
  int64_t bytes = 0;
  uint64_t alloc_ts = 0, free_ts = kOpen;  // free_requested_ts; kOpen: allocated at the end
  uint64_t stack = 0;
  bool activation = false;
  uint64_t seq = 0;  // the allocation's
};
// Allocation rows of a device, in allocation order (`activations_only`: category activation).
std::vector<Block> load_blocks(const Trace& t, int64_t device, bool activations_only);

// Bytes of `blocks` live at each of `times` (sorted): allocated before it, not freed by it.
std::vector<int64_t> live_bytes_at(const std::vector<Block>& blocks,
                                   const std::vector<uint64_t>& times);

// The site holding the most bytes among `blocks`, and a stack that shows it.
struct TopSite {
  std::string label;
  uint64_t stack = 0;
  int64_t bytes = 0;
  uint64_t count = 0;
};
TopSite top_site(const Trace& t, const std::vector<const Block*>& blocks);

// Live activation bytes at each step boundary and the fit through them (Note [Growth]).
Growth activation_growth(const std::vector<Block>& activations, const std::vector<Step>& steps);

// Note [The more specific finding]
// One pitfall can satisfy several detectors: an accumulated loss grows memory (leak) with
// activations that no backward ever uses (grad-in-eval). Each detector recomputes the
// graph-retention test for the device itself (so `--only` gives the same answer as a full
// run) and, where graph-retention fires, leaves the activations to it: grad-in-eval reports
// nothing on that device, and leak looks only at memory other than activations.
//
// Whether graph-retention fires on `device`, with the trace's steps or the device's.
bool graph_retained(const Trace& t, int64_t device, const std::vector<Step>& steps);
bool graph_retention_on(const Trace& trace, int64_t device);

// The autograd engine's backward scopes (only the retain_graph ones with `retain_only`), as
// (push, pop) times in push order; pop is kOpen for a scope still open at the end.
std::vector<std::pair<uint64_t, uint64_t>> backward_scopes(const Trace& t, bool retain_only);

// The step of a device (steps_of) holding time `ts`: started by it and not ended.
std::optional<StepSpan> step_holding(const Trace& trace, int64_t device, uint64_t ts);

// The steps' start times (absolute), in order.
std::vector<uint64_t> step_times(const Trace& trace);

// ---- tensors: view-retention, copy-instead-of-view ------------------------------------------

struct TensorRow {
  uint64_t tensor_id = 0, storage_id = 0, base_id = 0;
  int64_t device = 0;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  std::string dtype, op;
  uint64_t create_ts = 0;
  std::optional<uint64_t> release_ts;
  uint64_t thread = 0, stack = 0;
};
// Every tensor of the trace, by create_ts.
std::vector<TensorRow> load_tensors(const Trace& trace);
int64_t item_size(const std::string& dtype);
int64_t numel(const TensorRow& t);
// "[2, 3]"
std::string ints_text(const std::vector<int64_t>& v);

// Without tensor records, adds `id` to the skipped detectors and returns true.
bool skip_without_tensors(const Trace& trace, const char* id, Diagnosis& out);

// Note [Diagnosis thresholds: relative to the device's peak]: a finding must be worth at
// least 1% of the device's allocated peak, so a program's incidental views and copies, a few
// KiB beside hundreds of MiB, are not reported; the pitfalls the detectors name cost tens of
// percent.
int64_t one_percent_of_peak(const Trace& trace, int64_t device);

// ---- the caching allocator: fragmentation, oom, cache-held ------------------------------------

// The allocator's own granularity (docs/allocator.md, tensorlib/memory/sizes.h), signed as
// the curves are: blocks above kSmallSize come from the large pool, and a large request under
// 10 MiB gets a kLargeBuffer segment. Cached memory below one such segment is the allocator's
// normal rounding, not a pitfall.
constexpr auto kSmallSize = static_cast<int64_t>(tl::memory::kSmallSize);
constexpr auto kLargeBuffer = static_cast<int64_t>(tl::memory::kLargeBuffer);

// Why the allocator detectors skip a trace, or "" when they can run.
std::string allocator_skip_reason(const Trace& trace);

// A device with reserved memory but no blocks, in a trace where other devices have blocks:
// skipped with a note naming it (true), or a device to examine (false).
bool skip_device_without_blocks(const Trace& trace, const DeviceRef& dev, const char* id,
                                Diagnosis& out);

// Reserved memory at `ts`: how many segments (or mapped ranges), and the largest cached free
// block -- the largest gap between the blocks still active (not free_completed) inside one.
// With `pool`, only that pool's segments: a request is served from its
// own pool (a request up to 1 MiB from small segments), so a free block of the other cannot
// hold it.
struct SegmentsAt {
  int64_t count = 0;
  int64_t largest_free = 0;
};
SegmentsAt segments_at(const Trace& trace, int64_t device, uint64_t ts,
                       std::optional<events::Pool> pool = std::nullopt);

// The allocator settings the trace was recorded under (meta), "" for the defaults.
std::string allocator_settings(const Trace& trace);

inline constexpr const char* kFragmentationFix =
    "Let segments grow in place: TL_ALLOC_CONF=expandable_segments:True (PyTorch: "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); or stop the cache from splitting large "
    "blocks that other sizes cannot reuse with max_split_size_mb:N; or pad inputs to a few "
    "fixed shapes (bucketing) so freed blocks fit the next request.";

// ---- autocast: autocast-cache, grad-in-eval ---------------------------------------------------

// Note [Autocast weight copies] (support.cpp): of allocations live at one moment, autocast's
// 16-bit copies of float32 weights (`seqs`: their allocations' seq), their bytes, the largest
// one's stack, and the bytes of autocast's casts of activations beside them. grad-in-eval
// leaves the copies out of what no_grad would free: the cache lives for the autocast region.
struct AutocastCopies {
  std::set<uint64_t> seqs;
  int64_t bytes = 0, activation_bytes = 0;
  uint64_t largest_stack = 0;
};
AutocastCopies autocast_weight_copies(const Trace& trace,
                                      const std::vector<store::AllocationRow>& live);

}  // namespace tidemark::diagnose::detail
