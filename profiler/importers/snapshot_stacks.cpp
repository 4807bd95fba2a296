#include "profiler/importers/snapshot_stacks.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace tidemark::importers::snapshot {

uint64_t Stacks::stack(FrameRun run) {
  if (run == 0) return 0;
  if (run >= stack_of_.size()) stack_of_.resize(run + 1, 0);
  uint64_t& cached = stack_of_[run];
  if (cached) return cached;
  auto [items, count] = reader_.run_items(run);
  // PyTorch writes a new list per alloc (its frees share it), mostly with a content seen
  // before: look the whole stack up first, then walk the prefix tree only for a new one.
  ips_.clear();
  for (size_t i = count; i-- > 0;) ips_.push_back(frame(Ref(&doc_, items[i])));
  std::string_view key(reinterpret_cast<const char*>(ips_.data()), ips_.size() * sizeof(uint64_t));
  if (auto it = by_ips_.find(key); it != by_ips_.end()) return cached = it->second;
  uint64_t node = 0;
  for (uint64_t ip : ips_) {
    auto [it, fresh] = nodes_.try_emplace({node, ip}, nodes_.size() + 1);
    if (fresh) writer_->add_stack_node(it->second, node, ip);
    node = it->second;
  }
  by_ips_.emplace(std::string(key), node);
  max_depth_ = std::max(max_depth_, count);
  return cached = node;
}

// Note [Lenient fields]: a frame that is not a dict, or a field of an odd type, is unknown.
uint64_t Stacks::frame(Ref f) {
  uint32_t id = f.identity();
  if (id != std::numeric_limits<uint32_t>::max())
    if (auto it = frame_of_.find(id); it != frame_of_.end()) return it->second;
  auto text = [&](const char* key) -> std::string_view {
    std::optional<Ref> v = f.get(key);
    if (!v || v->is_none()) return {};
    auto s = v->as_string();
    if (!s) notes_.add("frames whose '" + std::string(key) + "' is not a str (read as unknown)");
    return s.value_or(std::string_view());
  };
  if (f.type() != Type::dict) notes_.add("frames that are not dicts (read as unknown)");
  FrameKey key{text("name"), text("filename"), 0};
  if (auto line = f.get("line"); line && !line->is_none()) {
    auto i = line->as_int();
    if (i && *i >= 0 && *i <= std::numeric_limits<int>::max())
      key.line = *i;
    else
      notes_.add("frames whose 'line' is not a line number (read as unknown)");
  }
  auto [it, fresh] = by_content_.try_emplace(key, frames_.size() + 1);
  if (fresh) {
    auto known = [](std::string_view s) { return s == "??" ? std::string() : std::string(s); };
    store::ResolvedFrame r;
    r.function = known(key.name);
    r.file = known(key.file);
    r.line = static_cast<int>(key.line);
    frames_.push_back(std::move(r));
  }
  if (id != std::numeric_limits<uint32_t>::max()) frame_of_[id] = it->second;
  return it->second;
}

}  // namespace tidemark::importers::snapshot
