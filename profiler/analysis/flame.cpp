#include "profiler/analysis/flame.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <system_error>
#include <map>
#include <string_view>
#include <utility>

namespace tidemark::analysis {

namespace {

// A node while the tree is built: children found by function.
struct Building {
  int64_t bytes = 0, self_bytes = 0;
  uint64_t count = 0;
  std::map<std::string, int64_t> locations;
  std::map<std::string, Building> children;
};

FlameNode finish(std::string frame, Building& b) {
  FlameNode n;
  n.frame = std::move(frame);
  n.bytes = b.bytes;
  n.count = b.count;
  n.self_bytes = b.self_bytes;
  n.locations.assign(b.locations.begin(), b.locations.end());
  std::stable_sort(n.locations.begin(), n.locations.end(),
                   [](const auto& a, const auto& c) { return a.second > c.second; });
  n.children.reserve(b.children.size());
  for (auto& [f, child] : b.children) n.children.push_back(finish(f, child));
  std::stable_sort(n.children.begin(), n.children.end(),
                   [](const FlameNode& a, const FlameNode& c) { return a.bytes > c.bytes; });
  return n;
}

}  // namespace

FlameNode flame_diff(const FlameNode& a, const FlameNode& b) {
  FlameNode d = b;
  std::function<void(const FlameNode*, FlameNode&)> mark = [&](const FlameNode* base, FlameNode& n) {
    n.base_bytes = base ? base->bytes : 0;
    for (FlameNode& c : n.children) {
      const FlameNode* match = nullptr;
      if (base)
        for (const FlameNode& bc : base->children)
          if (bc.frame == c.frame) match = &bc;
      mark(match, c);
    }
  };
  mark(&a, d);
  return d;
}

FlameNode flame_at_peak(const Trace& trace, int64_t device) {
  auto at = peak_point(trace, device);
  if (!at) return {};
  return flame_tree(group_allocations(trace, live_allocations(trace, device, *at), GroupBy::stack, 0),
                    &trace);
}

size_t FlameNode::depth() const {
  size_t d = 0;
  for (const FlameNode& c : children) d = std::max(d, c.depth() + 1);
  return d;
}

std::string cut_stack_frame(int stack_depth) {
  return "(stacks cut at " + std::to_string(stack_depth) + " frames)";
}

std::pair<std::string_view, std::string_view> split_frame(std::string_view label) {
  const size_t open = label.rfind(" (");
  if (open == std::string_view::npos || label.back() != ')') return {label, {}};
  const std::string_view loc = label.substr(open + 2, label.size() - open - 3);
  const size_t colon = loc.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == loc.size() ||
      loc.find_first_of("()") != std::string_view::npos ||
      loc.substr(colon + 1).find_first_not_of("0123456789") != std::string_view::npos)
    return {label, {}};
  return {label.substr(0, open), loc};
}

// A node's frame: the function and its file, without the line ("forward (linear.py)"), so one
// function's calls from several lines are one frame while same-named functions of different
// files (Python's `forward`s) stay apart.
std::string frame_key(std::string_view function, std::string_view location) {
  if (location.empty()) return std::string(function);
  return std::string(function) + " (" + std::string(location.substr(0, location.rfind(':'))) + ")";
}

size_t startup_frames(const std::vector<std::string>& frames) {
  size_t n = 0;
  while (n + 1 < frames.size()) {
    const std::string& f = frames[frames.size() - 1 - n];
    const bool startup = f == "_start" || f.rfind("_start (", 0) == 0 || f.rfind("__libc_start", 0) == 0;
    if (!startup) break;
    ++n;
  }
  return n;
}

bool group_truncated(const Trace& trace, const Group& g) {
  uint64_t id = 0;
  auto [p, ec] = std::from_chars(g.key.data(), g.key.data() + g.key.size(), id);
  return ec == std::errc() && p == g.key.data() + g.key.size() && trace.stack_truncated(id);
}

FlameNode flame_tree(const std::vector<Group>& stacks, const Trace* trace) {
  Building root;
  for (const Group& g : stacks) {
    Building* at = &root;
    auto add = [&](Building& n) {
      n.bytes += g.bytes;
      n.count += g.count;
    };
    add(root);
    if (g.frames.empty()) {
      at = &root.children["(no stack)"];
      add(*at);
    } else if (trace && group_truncated(*trace, g)) {
      at = &root.children[cut_stack_frame(trace->stack_depth())];
      add(*at);
    }
    for (auto f = g.frames.rbegin() + static_cast<long>(startup_frames(g.frames));
         f != g.frames.rend(); ++f) {
      auto [function, location] = split_frame(*f);
      at = &at->children[frame_key(function, location)];
      add(*at);
      if (!location.empty()) at->locations[std::string(location)] += g.bytes;
    }
    at->self_bytes += g.bytes;
  }
  return finish("", root);
}

}  // namespace tidemark::analysis
