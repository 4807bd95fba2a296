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
  size_t depth() const;             // levels below this node (0: a leaf)
};

// The tree of `stacks`: groups by GroupBy::stack (frames innermost first, as live_at and
// leaks give them). A group without frames (recorded without stacks) is a child "(no stack)"
// of the root. With `trace`, a stack cut short by the capture depth (Trace::stack_truncated)
// hangs from a child cut_stack_frame() of the root rather than passing as a caller of its
// own: its outer callers are unknown. The root holds the total.
FlameNode flame_tree(const std::vector<Group>& stacks, const Trace* trace = nullptr);

// A frame label ("function (file:line)") split into the function and "file:line" (empty
// when the label has no location).
std::pair<std::string_view, std::string_view> split_frame(std::string_view label);

// How many outermost frames of `frames` (innermost first) are the C runtime's start-up
// (`_start`, `__libc_start_main`, `__libc_start_call_main`), which flame graphs and folded
// stacks leave out: every stack of the main thread then starts at `main`, whether the capture
// depth kept the start-up frames or cut them. Never all of them.
size_t startup_frames(const std::vector<std::string>& frames);

// A differential flame graph: `b` with each frame's bytes in `a` as its base_bytes, frames
// matched by their path of functions from the root. Drawn with b's widths (what a frame that
// vanished held is in its caller's change).
FlameNode flame_diff(const FlameNode& a, const FlameNode& b);

// The stacks live at a device's allocated peak, as a flame graph (empty when the device has no
// memory events).
FlameNode flame_at_peak(const Trace& trace, int64_t device);

// Where flame graphs and folded stacks put stacks cut short: "(stacks cut at 16 frames)".
std::string cut_stack_frame(int stack_depth);
// Whether the stack of a GroupBy::stack group was cut short (its key is the stack id).
bool group_truncated(const Trace& trace, const Group& g);

}  // namespace tidemark::analysis
