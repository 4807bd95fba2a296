// Phases and memory categories inferred for a trace whose allocations carry none (an imported
// PyTorch snapshot): the rules are Note [Inferred categories] in infer.cpp, documented in
// docs/importers.md ("Inferred phases and categories"). The importer calls them; they know
// nothing of pickles or traces, only frames, times and lifetimes, so tests can feed them.
#pragma once

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
};
std::string_view phase_name(Phase p);

// The phase one frame names (`function`: the function, demangled or Python's name; `file`: its
// source file), or none.
Phase phase_of_frame(std::string_view function, std::string_view file);

// Whether a frame is autograd's own code (a graph node or saved variable being destroyed,
// the engine): a block such a frame frees was held by a graph.
bool autograd_frame(std::string_view function);

// Combines the phases of a stack's frames (any order) into the stack's phase: backward over
// optimizer over data over setup over forward (backward recomputes forward under checkpointing;
// an optimizer or a DataLoader calls tensor ops a forward would too).
class StackPhase {
 public:
  void add(Phase p);
  Phase phase() const { return phase_; }

 private:
  Phase phase_ = Phase::none;
};

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// One block lifetime (an alloc to its free_requested).
struct Block {
  uint64_t alloc_ts = 0;
  uint64_t free_ts = kNever;  // kNever: still allocated at the end of the trace
  Phase alloc_phase = Phase::none, free_phase = Phase::none;
  bool before_trace = false;  // allocated before the snapshot's history began
  bool freed_by_autograd = false;  // the free's frames are autograd's (autograd_frame)
};

// An event with a phase its frames name (an alloc or a free), in time order.
struct PhaseEvent {
  uint64_t ts = 0;
  Phase phase = Phase::none;
};

struct Result {
  std::vector<events::Category> categories;  // one per block, in the order given
  // Runs of one phase (consecutive classified events of that phase), by phase.
  uint64_t runs[6] = {};
  // Step boundaries inferred from the optimizer's runs: the end of each (Note [Inferred
  // categories]); empty when the trace has no optimizer run.
  std::vector<uint64_t> step_ends;
};

// The categories of `blocks` on one device. `events` are that device's classified events in
// time order (alloc and free phases are looked up in it for blocks whose own frames say
// nothing).
Result infer(const std::vector<Block>& blocks, const std::vector<PhaseEvent>& events);

}  // namespace tidemark::importers::infer
