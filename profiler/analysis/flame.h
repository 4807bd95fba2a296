// Flame graphs of allocations: stacks merged from the outermost frame down, so a node holds
// the bytes of every allocation whose stack passes through it (heaptrack's and
// flamegraph.pl's picture of where memory comes from). The GUI's Flame graph tab draws these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"

namespace tidemark::analysis {

struct FlameNode {
  std::string frame;  // "function (file:line)", as Group::frames; "" for the root
  int64_t bytes = 0;  // of the allocations whose stacks pass through this frame
  uint64_t count = 0;
  // Of the allocations whose stack ends here (the innermost frame): bytes - the children's.
  int64_t self_bytes = 0;
  std::vector<FlameNode> children;  // largest first, ties by frame
  size_t depth() const;             // levels below this node (0: a leaf)
};

// The tree of `stacks`: groups by GroupBy::stack (frames innermost first, as live_at and
// leaks give them). A group without frames (recorded without stacks) is a child "(no stack)"
// of the root. The root holds the total.
FlameNode flame_tree(const std::vector<Group>& stacks);

}  // namespace tidemark::analysis
