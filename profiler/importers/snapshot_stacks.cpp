#include "profiler/importers/snapshot_stacks.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace tidemark::importers::snapshot {

std::string_view Stacks::text_field(Ref f, const char* key) {
  std::optional<Ref> v = f.get(key);
  if (!v || v->is_none()) return {};
  auto s = v->as_string();
  if (!s) notes_.add("frames whose '" + std::string(key) + "' is not a str (read as unknown)");
  return s.value_or(std::string_view());
}

uint64_t Stacks::stack(FrameRun run) {
  if (run == 0) return 0;
  if (run >= stack_of_.size()) stack_of_.resize(run + 1, 0);
  uint64_t& cached = stack_of_[run];
  if (cached) return cached;
  auto [items, count] = reader_.run_items(run);
  // PyTorch writes a new list per alloc (its frees share it), mostly with a content seen
  // before: look the whole stack up first, then walk the prefix tree only for a new one.
  ips_.clear();
  for (size_t i = count; i-- > 0;) frame(Ref(&doc_, items[i]), ips_);
  std::string_view key(reinterpret_cast<const char*>(ips_.data()), ips_.size() * sizeof(uint64_t));
  if (auto it = by_ips_.find(key); it != by_ips_.end()) return cached = it->second;
  uint64_t node = 0;
  for (uint64_t ip : ips_) {
    auto [it, fresh] = nodes_.try_emplace({node, ip}, nodes_.size() + 1);
    if (fresh) writer_->add_stack_node(it->second, node, ip);
    node = it->second;
  }
  by_ips_.emplace(std::string(key), node);
  max_depth_ = std::max(max_depth_, ips_.size());
  return cached = node;
}

// Note [Lenient fields]: a frame that is not a dict, or a field of an odd type, is unknown.
void Stacks::frame(Ref f, std::vector<uint64_t>& out) {
  const uint32_t id = f.identity();
  if (id != std::numeric_limits<uint32_t>::max())
    if (auto it = frame_of_.find(id); it != frame_of_.end()) {
      out.insert(out.end(), frame_ips_.begin() + it->second.first,
                 frame_ips_.begin() + it->second.first + it->second.second);
      return;
    }
  if (reader_.is_left_out(f.val())) {  // Note [Frame bound]
    out.push_back(intern({kLeftOutFrame, "", 0}));
    return;
  }
  auto text = [&](const char* key) { return text_field(f, key); };
  if (f.type() != Type::dict) notes_.add("frames that are not dicts (read as unknown)");
  FrameKey key{text("name"), text("filename"), 0};
  if (auto line = f.get("line"); line && !line->is_none()) {
    auto i = line->as_int();
    if (i && *i >= 0 && *i <= std::numeric_limits<int>::max())
      key.line = *i;
    else
      notes_.add("frames whose 'line' is not a line number (read as unknown)");
  }
  const size_t first = out.size();
  const std::string_view trace = text("fx_original_trace");
  if (trace.find_first_not_of(" \t\r\n") == std::string_view::npos || !fx_frames(f, trace, out))
    out.push_back(intern(key));
  if (id != std::numeric_limits<uint32_t>::max()) {
    frame_of_[id] = {static_cast<uint32_t>(frame_ips_.size()),
                     static_cast<uint32_t>(out.size() - first)};
    frame_ips_.insert(frame_ips_.end(), out.begin() + static_cast<ptrdiff_t>(first), out.end());
  }
}

uint64_t Stacks::intern(const FrameKey& key) {
  auto [it, fresh] = by_content_.try_emplace(key, frames_.size() + 1);
  if (fresh) {
    auto known = [](std::string_view s) { return s == "??" ? std::string() : std::string(s); };
    store::ResolvedFrame r;
    r.function = known(key.name);
    r.file = known(key.file);
    r.line = static_cast<int>(key.line);
    frames_.push_back(std::move(r));
  }
  return it->second;
}

// Note [FX frames]
// ~~~~~~~~~~~~~~~~
// With torch.compile, the frames of the code the compiler generated (a GraphModule's
// `forward` in `<eval_with_key>.N`, Inductor's `call` in /tmp/torchinductor_*/...) name no
// line of the user's. PyTorch (`torch.cuda.memory._snapshot(augment_with_fx_traces=True)`)
// adds to such a frame the FX node that made the allocation (`fx_node_op`, `fx_node_name`,
// `fx_node_target`) and the node's `stack_trace`, the traceback of the user's source that
// traced it (`fx_original_trace`: lines `  File "/x/model.py", line 12, in forward` each
// followed by its code line, outermost first). The user's lines take the generated frame's
// place in the stack, so the allocation's site (Note [Allocation site]) is the user's line
// that made the tensor; the innermost of them carries the node in its function name,
// `forward [fx addmm: aten.addmm.default]` (`[fx <node name>: <target>]`, either part alone
// when the other is missing), so the FX node stays visible and a line that makes several
// nodes shows each. A trace with no `File "...", line N, in NAME` line, or with one that does
// not read as such, is counted in the notes and the frame kept as it is.
bool Stacks::fx_frames(Ref f, std::string_view trace, std::vector<uint64_t>& out) {
  std::vector<FrameKey> lines;
  bool bad = false;
  for (size_t at = 0; at < trace.size() && !bad;) {
    size_t end = trace.find('\n', at);
    if (end == std::string_view::npos) end = trace.size();
    std::string_view l = trace.substr(at, end - at);
    at = end + 1;
    const size_t start = l.find_first_not_of(' ');
    if (start == std::string_view::npos || l.substr(start, 6) != "File \"")
      continue;  // code, carets
    l.remove_prefix(start + 6);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.remove_suffix(1);
    // FILE", line N, in NAME (a file name may hold '"', so the last `", line `)
    const size_t q = l.rfind("\", line ");
    const size_t in = q == std::string_view::npos ? q : l.find(", in ", q + 8);
    if (in == std::string_view::npos || in == q + 8 || in - (q + 8) > 9) {
      bad = true;
      break;
    }
    int64_t number = 0;
    for (char c : l.substr(q + 8, in - (q + 8))) {
      if (c < '0' || c > '9') bad = true;
      number = number * 10 + (c - '0');
    }
    lines.push_back({l.substr(in + 5), l.substr(0, q), number});
  }
  if (bad || lines.empty()) {
    notes_.add("frames whose 'fx_original_trace' is not a Python traceback (kept as they are)");
    return false;
  }
  auto text = [&](const char* key) { return text_field(f, key); };
  const std::string_view node = text("fx_node_name"), target = text("fx_node_target");
  if (!node.empty() || !target.empty()) {
    std::string label = std::string(lines.back().name) + " [fx " + std::string(node) +
                        (!node.empty() && !target.empty() ? ": " : "") + std::string(target) + "]";
    names_.push_back(std::move(label));
    lines.back().name = names_.back();
  }
  for (const FrameKey& k : lines) out.push_back(intern(k));
  return true;
}

}  // namespace tidemark::importers::snapshot
