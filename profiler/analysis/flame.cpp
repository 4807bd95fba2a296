#include "profiler/analysis/flame.h"

#include <algorithm>
#include <map>
#include <utility>

namespace tidemark::analysis {

namespace {

// A node while the tree is built: children found by frame.
struct Building {
  int64_t bytes = 0, self_bytes = 0;
  uint64_t count = 0;
  std::map<std::string, Building> children;
};

FlameNode finish(std::string frame, Building& b) {
  FlameNode n;
  n.frame = std::move(frame);
  n.bytes = b.bytes;
  n.count = b.count;
  n.self_bytes = b.self_bytes;
  n.children.reserve(b.children.size());
  for (auto& [f, child] : b.children) n.children.push_back(finish(f, child));
  std::stable_sort(n.children.begin(), n.children.end(),
                   [](const FlameNode& a, const FlameNode& c) { return a.bytes > c.bytes; });
  return n;
}

}  // namespace

size_t FlameNode::depth() const {
  size_t d = 0;
  for (const FlameNode& c : children) d = std::max(d, c.depth() + 1);
  return d;
}

FlameNode flame_tree(const std::vector<Group>& stacks) {
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
    }
    for (auto f = g.frames.rbegin(); f != g.frames.rend(); ++f) {
      at = &at->children[*f];
      add(*at);
    }
    at->self_bytes += g.bytes;
  }
  return finish("", root);
}

}  // namespace tidemark::analysis
