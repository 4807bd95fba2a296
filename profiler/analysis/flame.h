// Flame graphs of allocations: stacks merged from the outermost frame down, so a node holds
// the bytes of every allocation whose stack passes through it (heaptrack's and
// flamegraph.pl's picture of where memory comes from). The GUI's Flame graph tab draws these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

struct FlameNode {
  // The function and its file without the line ("forward (linear.py)"; Group::frames' label
  // otherwise); "" for the root. A function reached from the same caller is one node, wherever
  // in it the calls were made; same-named functions of different files are not.
  std::string frame;
  // Where in the function: "file:line" and the bytes through it, largest first (empty when
  // the frame has no source location).
  std::vector<std::pair<std::string, int64_t>> locations;
  int64_t bytes = 0;  // of the allocations whose stacks pass through this frame
  uint64_t count = 0;
  // Of the allocations whose stack ends here (the innermost frame): bytes - the children's.
  int64_t self_bytes = 0;
  // In a differential graph (flame_diff): the same frame's bytes in the base graph (0: new
  // in this one); -1 in a plain graph.
  int64_t base_bytes = -1;
  std::vector<FlameNode> children;  // largest first, ties by frame
  // Library code (Group::library: Note [Allocation site]): every frame merged here was. A
  // fold is library code too.
  bool library = false;
  // A fold (Note [Folded library frames]): the run of library frames this node stands for,
  // outermost first, each with its frame, locations and `library` (no children; its bytes and
  // count are the fold's). Empty for a frame.
  std::vector<FlameNode> folded;
  // A frame of a fold expanded by unfold(): how many frames of the run from this one inward
  // (the outermost holds the run's length, the innermost 1); 0 otherwise.
  size_t unfolded = 0;
  size_t depth() const;  // levels below this node (0: a leaf)
};

// Note [Folded library frames]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A stack of a PyTorch program is mostly frames of PyTorch, CPython and the C++ standard
// library between the user's own (12 frames of `std::__shared_ptr`, `c10::` and
// `_PyEval_EvalFrameDefault` between two lines of a training loop), and a tensorlib program's
// ends in tensorlib's allocator. With Frames::user -- the rule that names a site after the
// user's own frame -- a flame graph folds each run of kFoldedRunMin or more consecutive library
// frames of a stack (judged frame by frame by is_library_frame, Group::library, never by the
// label) into one frame, folded_frame_label(): "… 12 library frames (c10::foo …)", named after
// the run's outermost frame, the library function the user's code called. Folding is per stack,
// before stacks are merged: stacks with the same run share one fold, which is as wide as their
// bytes, and a different run under the same caller is another fold. A single library frame
// stays as it is (a fold of one would hide its name and save nothing). unfold() turns a fold
// back into its frames, and refold() folds them again (the GUI's click). With Frames::all
// nothing is folded. library_runs() is the rule over one stack, for any output of stacks.
constexpr size_t kFoldedRunMin = 2;

// The runs of `library` (one flag per frame, in the stack's order) that fold: [begin, end)
// index ranges of at least kFoldedRunMin consecutive library frames, in order.
std::vector<std::pair<size_t, size_t>> library_runs(const std::vector<bool>& library);

// A fold's frame: "… 12 library frames (tl::matmul …)" from the run's length and its
// outermost frame's label ("function (file:line)"; the function's qualified name is shown).
std::string folded_frame_label(size_t frames, std::string_view outermost);

// The tree of `stacks`: groups by GroupBy::stack (frames innermost first, as live_at and
// leaks give them). A group without frames (recorded without stacks) is a child "(no stack)"
// of the root. With `trace`, a stack cut short by the capture depth (Trace::stack_truncated)
// hangs from a child cut_stack_frame() of the root rather than passing as a caller of its
// own: its outer callers are unknown. The root holds the total. With `frames` Frames::user,
// runs of library frames are folded (Note [Folded library frames]).
FlameNode flame_tree(const std::vector<Group>& stacks, const Trace* trace = nullptr,
                     Frames frames = Frames::all);

// A fold (FlameNode::folded not empty) expanded into its frames: a chain, outermost first, each
// as wide as the fold (its bytes, count and base bytes), the innermost holding the fold's
// children and self bytes; FlameNode::unfolded marks the run. Any other node comes back as is.
FlameNode unfold(const FlameNode& fold);
// The run unfold() made, given its outermost frame (unfolded the run's length), as the fold it
// was; any other node comes back as is.
FlameNode refold(const FlameNode& outermost);

// A frame label ("function (file:line)") split into the function and "file:line" (empty
// when the label has no location).
std::pair<std::string_view, std::string_view> split_frame(std::string_view label);

// How many outermost frames of `frames` (innermost first) are the C runtime's start-up
// (`_start`, `__libc_start_main`, `__libc_start_call_main`), which flame graphs and folded
// stacks leave out: every stack of the main thread then starts at `main`, whether the capture
// depth kept the start-up frames or cut them. Never all of them.
size_t startup_frames(const std::vector<std::string>& frames);

// A differential flame graph: `b` with each frame's bytes in `a` as its base_bytes, frames
// matched by their path of functions from the root (a fold by its frames). Drawn with b's
// widths (what a frame that vanished held is in its caller's change).
FlameNode flame_diff(const FlameNode& a, const FlameNode& b);

// The stacks live at a device's allocated peak, as a flame graph (empty when the device has no
// memory events), folded as the trace's rule for sites says (Trace::frames_mode).
FlameNode flame_at_peak(const Trace& trace, int64_t device);

// Where flame graphs and folded stacks put stacks cut short: "(stacks cut at 16 frames)".
std::string cut_stack_frame(int stack_depth);
// Whether the stack of a GroupBy::stack group was cut short (its key is the stack id).
bool group_truncated(const Trace& trace, const Group& g);

}  // namespace tidemark::analysis
