#include "profiler/analysis/flame.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

namespace tidemark::analysis {

namespace {

// A node while the tree is built: children found by function (a fold's by its frames).
struct Building {
  int64_t bytes = 0, self_bytes = 0;
  uint64_t count = 0;
  bool seen = false;
  bool library = false;  // every frame merged here was library code
  std::map<std::string, int64_t> locations;
  std::map<std::string, Building> children;
  // A fold's: its frame, and its run's frames (frame, where in it and the bytes there).
  std::string label;
  std::vector<std::pair<std::string, std::map<std::string, int64_t>>> run;
};

std::vector<std::pair<std::string, int64_t>> by_bytes(const std::map<std::string, int64_t>& m) {
  std::vector<std::pair<std::string, int64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& c) { return a.second > c.second; });
  return v;
}

FlameNode finish(std::string frame, Building& b) {
  FlameNode n;
  n.frame = b.label.empty() ? std::move(frame) : b.label;
  n.bytes = b.bytes;
  n.count = b.count;
  n.self_bytes = b.self_bytes;
  n.library = b.library;
  n.locations = by_bytes(b.locations);
  for (auto& [f, locations] : b.run) {
    FlameNode r;
    r.frame = f;
    r.locations = by_bytes(locations);
    r.bytes = b.bytes;
    r.count = b.count;
    r.library = true;
    n.folded.push_back(std::move(r));
  }
  n.children.reserve(b.children.size());
  for (auto& [f, child] : b.children) n.children.push_back(finish(f, child));
  std::stable_sort(n.children.begin(), n.children.end(),
                   [](const FlameNode& a, const FlameNode& c) { return a.bytes > c.bytes; });
  return n;
}

// The same frame in two graphs: the same function, or a fold of the same frames.
bool same_frame(const FlameNode& a, const FlameNode& b) {
  if (a.frame != b.frame || a.folded.size() != b.folded.size()) return false;
  for (size_t i = 0; i < a.folded.size(); ++i)
    if (a.folded[i].frame != b.folded[i].frame) return false;
  return true;
}

// The function of a flame frame ("function (file)", or "function" without a location).
std::string_view frame_function(std::string_view frame) {
  const size_t open = frame.rfind(" (");
  if (open == std::string_view::npos || frame.back() != ')') return frame;
  const std::string_view file = frame.substr(open + 2, frame.size() - open - 3);
  return file.find_first_of("()") == std::string_view::npos ? frame.substr(0, open) : frame;
}

}  // namespace

FlameNode flame_diff(const FlameNode& a, const FlameNode& b) {
  FlameNode d = b;
  std::function<void(const FlameNode*, FlameNode&)> mark = [&](const FlameNode* base,
                                                               FlameNode& n) {
    n.base_bytes = base ? base->bytes : 0;
    for (FlameNode& f : n.folded) f.base_bytes = n.base_bytes;
    for (FlameNode& c : n.children) {
      const FlameNode* match = nullptr;
      if (base)
        for (const FlameNode& bc : base->children)
          if (same_frame(bc, c)) match = &bc;
      mark(match, c);
    }
  };
  mark(&a, d);
  return d;
}

FlameNode flame_at_peak(const Trace& trace, int64_t device) {
  auto at = peak_point(trace, device);
  if (!at) return {};
  return flame_tree(
      group_allocations(trace, live_allocations(trace, device, *at), GroupBy::stack, 0), &trace,
      trace.frames_mode());
}

std::vector<std::pair<size_t, size_t>> library_runs(const std::vector<bool>& library) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < library.size();) {
    size_t end = i;
    while (end < library.size() && library[end]) ++end;
    if (end - i >= kFoldedRunMin) runs.emplace_back(i, end);
    i = std::max(end, i + 1);
  }
  return runs;
}

std::string folded_frame_label(size_t frames, std::string_view outermost) {
  const std::string_view function = frame_function(outermost);
  const std::string_view q = qualified_name(function);  // a part of `function`
  std::string name(q);
  // qualified_name stops at the call operator's own parentheses: "Module::operator()".
  if (q.ends_with("operator") &&
      function.substr(static_cast<size_t>(q.data() - function.data()) + q.size()).starts_with("()"))
    name += "()";
  return "… " + std::to_string(frames) + " library frames (" + name + " …)";
}

FlameNode unfold(const FlameNode& fold) {
  if (fold.folded.empty()) return fold;
  const size_t n = fold.folded.size();
  // From the innermost frame out: each frame the only child of the one before.
  FlameNode chain = fold.folded.back();
  chain.children = fold.children;
  chain.self_bytes = fold.self_bytes;
  for (size_t k = n; k-- > 0;) {
    if (k + 1 < n) {
      FlameNode outer = fold.folded[k];
      outer.children.push_back(std::move(chain));
      chain = std::move(outer);
    }
    chain.bytes = fold.bytes;
    chain.count = fold.count;
    chain.base_bytes = fold.base_bytes;
    chain.library = true;
    chain.unfolded = n - k;
  }
  return chain;
}

FlameNode refold(const FlameNode& outermost) {
  if (outermost.unfolded == 0) return outermost;
  FlameNode fold;
  fold.frame = folded_frame_label(outermost.unfolded, outermost.frame);
  fold.bytes = outermost.bytes;
  fold.count = outermost.count;
  fold.base_bytes = outermost.base_bytes;
  fold.library = true;
  const FlameNode* at = &outermost;
  while (true) {
    FlameNode f;
    f.frame = at->frame;
    f.locations = at->locations;
    f.bytes = at->bytes;
    f.count = at->count;
    f.base_bytes = at->base_bytes;
    f.library = true;
    fold.folded.push_back(std::move(f));
    if (at->unfolded <= 1 || at->children.size() != 1) break;
    at = &at->children.front();
  }
  fold.children = at->children;
  fold.self_bytes = at->self_bytes;
  return fold;
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
    const bool startup =
        f == "_start" || f.rfind("_start (", 0) == 0 || f.rfind("__libc_start", 0) == 0;
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

FlameNode flame_tree(const std::vector<Group>& stacks, const Trace* trace, Frames frames) {
  Building root;
  for (const Group& g : stacks) {
    Building* at = &root;
    auto add = [&](Building& n, bool library) {
      n.library = (!n.seen || n.library) && library;
      n.seen = true;
      n.bytes += g.bytes;
      n.count += g.count;
    };
    add(root, false);
    if (g.frames.empty()) {
      at = &root.children["(no stack)"];
      add(*at, false);
    } else if (trace && group_truncated(*trace, g)) {
      at = &root.children[cut_stack_frame(trace->stack_depth())];
      add(*at, false);
    }
    // Outermost first, without the C runtime's start-up frames: each frame's function and
    // location, key and kind.
    struct Frame {
      std::string_view function, location;
      std::string key;
    };
    std::vector<Frame> fs;
    std::vector<bool> library;
    for (size_t i = g.frames.size() - startup_frames(g.frames); i-- > 0;) {
      auto [function, location] = split_frame(g.frames[i]);
      fs.push_back({function, location, frame_key(function, location)});
      library.push_back(i < g.library.size() && g.library[i]);
    }
    // Note [Folded library frames]: per stack, before the merge.
    const auto runs =
        frames == Frames::user ? library_runs(library) : std::vector<std::pair<size_t, size_t>>{};
    auto run = runs.begin();
    for (size_t i = 0; i < fs.size();) {
      if (run != runs.end() && run->first == i) {
        const auto [begin, end] = *run++;
        // A fold is found by its frames: no function's key holds a control character.
        std::string key = "\x1f";
        for (size_t k = begin; k < end; ++k) key += fs[k].key + '\x1f';
        at = &at->children[key];
        if (!at->seen) {
          at->label = folded_frame_label(end - begin, fs[begin].key);
          for (size_t k = begin; k < end; ++k) at->run.push_back({fs[k].key, {}});
        }
        add(*at, true);
        for (size_t k = begin; k < end; ++k)
          if (!fs[k].location.empty())
            at->run[k - begin].second[std::string(fs[k].location)] += g.bytes;
        i = end;
        continue;
      }
      at = &at->children[fs[i].key];
      add(*at, library[i]);
      if (!fs[i].location.empty()) at->locations[std::string(fs[i].location)] += g.bytes;
      ++i;
    }
    at->self_bytes += g.bytes;
  }
  return finish("", root);
}

}  // namespace tidemark::analysis
