// Native stacks: capture with libunwind, interning into a prefix tree, and symbolization with
// elfutils libdw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/store/trace_format.h"

namespace tidemark::record {

inline constexpr int kMaxStackDepth = 64;

// Return addresses of the calling thread, innermost first: at most `max_depth` (<= 64),
// skipping the `skip` innermost frames (the profiler's own). Returns how many were written.
// Async-signal-unsafe but allocation-free; never throws. Called with the allocator's mutex
// held (Note [Capture under a lock] in stacks.cpp).
int capture_stack(uint64_t* ips, int max_depth, int skip) noexcept;

// Stacks as a prefix tree rooted at the outermost frame, so stacks that share callers share
// nodes. Single-threaded (the recorder's writer thread owns it).
class StackTable {
 public:
  struct Node {
    uint64_t id, parent, ip;
  };
  // Interns `ips` (innermost first, as capture_stack gives them) and returns the id of the
  // innermost node (0 for an empty stack). Nodes created by this call are appended to
  // `created`, parents before children.
  uint64_t intern(const uint64_t* ips, int n, std::vector<Node>& created);
  size_t size() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The executable mappings of this process (/proc/self/maps).
std::vector<store::ModuleInfo> read_modules();

// Resolves return addresses of a (possibly finished) process from its module list: function
// (demangled), file, line, and inlined frames. Uses the binaries' DWARF through libdw.
class Symbolizer {
 public:
  explicit Symbolizer(std::vector<store::ModuleInfo> modules);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;
  // A return address points after the call; resolution uses ip - 1 so the line is the call's.
  // Innermost inlined frame first (Note [Inlined frames] in symbolizer.cpp).
  std::vector<store::ResolvedFrame> resolve(uint64_t ip);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tidemark::record
