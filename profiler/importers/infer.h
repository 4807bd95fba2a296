// Phases and memory categories inferred for a trace whose allocations carry none (an imported
// PyTorch snapshot): the rules are Note [Inferred categories] in infer.cpp, documented in
// docs/importers.md ("Inferred phases and categories"). The importer calls them; they know
// nothing of pickles or traces, only frames, times and lifetimes, so tests can feed them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/events/events.h"

namespace tidemark::importers::infer {

// What the program was doing when it allocated or freed a block.
enum class Phase : uint8_t {
  none,       // the frames say nothing
  setup,      // building or moving the model: module constructors, `to`, `cuda`, init
  data,       // data loading: DataLoader, datasets, collate
  forward,    // a module's forward
  backward,   // the autograd engine
  optimizer,  // an optimizer's step (or zero_grad)
  recompute,  // a forward run again inside backward (activation checkpointing)
};
inline constexpr size_t kPhases = 7;
std::string_view phase_name(Phase p);

// The phase one frame names (`function`: the function, demangled or Python's name; `file`: its
// source file), or none.
Phase phase_of_frame(std::string_view function, std::string_view file);

// Whether a frame is one of autograd's graph objects (a node, a saved variable: their
// destructors): a block such a frame frees was held by a graph.
bool autograd_frame(std::string_view function);

// Whether a frame is activation checkpointing's (tl::checkpoint, torch.utils.checkpoint): in
// forward, a checkpointed segment saves nothing for backward.
bool checkpoint_frame(std::string_view function, std::string_view file);

// Whether a frame is a `zero_grad` of PyTorch (`Optimizer.zero_grad`, `Module.zero_grad`) or
// tensorlib: a block such a frame frees is a gradient (set_to_none).
bool zero_grad_frame(std::string_view function, std::string_view file);

// Whether a frame is cuBLAS's workspace being made (`at::cuda::getNewWorkspace`, the handle
// and Lt workspace getters): library state kept for the process, no category of the program's.
bool workspace_frame(std::string_view function);

// Whether a frame is a dataset's item getter (Python's `__getitem__`, a C++ `...::get`): what
// it allocates under a DataLoader is one example, which collating copies into the batch.
bool item_getter_frame(std::string_view function);

// Combines the phases of a stack's frames (any order) into the stack's phase: backward over
// optimizer over data over setup over forward (an optimizer or a DataLoader calls tensor ops a
// forward would too), except that forward frames under backward ones are a recompute
// (checkpointing runs the forward again inside backward).
class StackPhase {
 public:
  void add(Phase p);
  Phase phase() const;

 private:
  Phase phase_ = Phase::none;
  bool forward_ = false;
};

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// One block lifetime (an alloc to its free_requested), by the positions of its events in the
// device's event list given to infer().
struct Block {
  uint64_t alloc_event = 0;      // index of its alloc in `events` (ignored when before_trace)
  uint64_t free_event = kNever;  // index of its free; kNever: allocated at the end of the trace
  Phase alloc_phase = Phase::none, free_phase = Phase::none;  // from its own frames
  bool before_trace = false;        // allocated before the snapshot's history began
  bool freed_by_autograd = false;   // the free's frames are autograd's (autograd_frame)
  bool freed_by_zero_grad = false;  // the free's frames are a zero_grad's (zero_grad_frame)
  bool checkpointed = false;        // allocated in a checkpointed segment (checkpoint_frame)
  bool item = false;                // data loading: made by a dataset's item getter (one example)
  bool workspace = false;           // made for cuBLAS's workspace (workspace_frame)
  uint64_t size = 0;                // the bytes asked for (rule 3's state made before the history)
};

// An alloc or a free of the device, in order, with the phase its frames name (none when they
// say nothing).
struct PhaseEvent {
  uint64_t ts = 0;
  Phase phase = Phase::none;
  bool alloc = false;
  uint64_t stack = 0;  // an alloc's call path (any id its frames share; 0: no frames)
  // The outermost module forward the alloc was made in, as the line of it that was running
  // (any id that function, file and line share; 0: none): a model's layers, called from one
  // line of its forward, share it; a training loop's iterations do not (Note [Inferred
  // categories], rule 5).
  uint64_t forward_line = 0;
};

// Whether a frame is a module's forward (Python's `forward`, C++'s `...::forward`).
bool forward_frame(std::string_view function);

// What the inferred step boundaries come from (Note [Inferred categories], rules 4 and 5).
enum class StepBasis : uint8_t { none, optimizer, backward, repetition };

struct Result {
  std::vector<events::Category> categories;  // one per block, in the order given
  // Runs of one phase (consecutive classified events of that phase), by phase.
  uint64_t runs[kPhases] = {};
  // Step boundaries, as positions in `events` (a step comes just before events[p]; p ==
  // events.size(): after the last): the end of each optimizer run, or backward run when the
  // optimizer left at most one, or else of each repetition of the allocations (`step_basis`:
  // Note [Inferred categories], rules 4 and 5).
  std::vector<uint64_t> step_ends;
  StepBasis step_basis = StepBasis::none;
};

// Rule 5: the ends of the iterations of a loop that makes the same allocations, in the same
// order, every time (positions in `events`, as Result::step_ends), or none.
std::vector<uint64_t> repetition_step_ends(const std::vector<PhaseEvent>& events);

// The categories of `blocks` on one device, whose allocs and frees are `events`.
Result infer(const std::vector<Block>& blocks, const std::vector<PhaseEvent>& events);

}  // namespace tidemark::importers::infer
