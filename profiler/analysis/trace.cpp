#include "profiler/analysis/trace.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>

#include "profiler/naming/units.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::analysis {

std::vector<DeviceMatch> match_devices(const std::vector<DeviceRef>& a,
                                       const std::vector<DeviceRef>& b) {
  // Note [Matching devices]
  auto named = [](const std::vector<DeviceRef>& devices,
                  const std::string& name) -> const DeviceRef* {
    for (const DeviceRef& d : devices)
      if (d.name == name) return &d;
    return nullptr;
  };
  std::vector<DeviceMatch> out;
  for (const DeviceRef& d : a) out.push_back({d.name, &d, named(b, d.name)});
  for (const DeviceRef& d : b)
    if (!named(a, d.name)) out.push_back({d.name, nullptr, &d});
  return out;
}

std::vector<DeviceMatch> match_devices(const Trace& a, const Trace& b) {
  return match_devices(a.devices(), b.devices());
}

Trace::~Trace() = default;
Trace::Trace(Trace&&) noexcept = default;
Trace& Trace::operator=(Trace&&) noexcept = default;

Trace Trace::open(const std::string& path, store::TraceReader::Require require) {
  Trace t;
  t.reader_ = std::make_unique<store::TraceReader>(store::TraceReader::open(path, require));
  namespace k = store::meta_keys;
  auto meta_u64 = [&](const char* key) -> std::optional<uint64_t> {
    auto v = t.meta_int(key);
    return v ? std::optional<uint64_t>(static_cast<uint64_t>(*v)) : std::nullopt;
  };
  auto first = meta_u64(k::kFirstTsNs), last = meta_u64(k::kLastTsNs);
  auto start = meta_u64(k::kStartTsNs);
  t.origin_ns_ = first ? *first : start.value_or(0);
  auto end = last ? last : t.reader_->end_ts();
  t.end_ns_ = end && *end >= t.origin_ns_ ? *end : t.origin_ns_;
  for (const store::DeviceRow& row : t.reader_->devices()) {
    DeviceRef d{row.id,        device_name(row.info.id),
                row.info.name, row.info.capacity,
                row.info.rank, device_name(row.info.rank ? row.info.rank_id : row.info.id)};
    if (d.rank) d.name = "rank" + std::to_string(*d.rank) + "/" + d.local_name;
    t.devices_.push_back(std::move(d));
  }
  t.stack_depth_ = static_cast<int>(meta_u64(k::kStackDepth).value_or(0));
  t.imported_ = t.meta_text(k::kCommandLine).rfind("pytorch-snapshot:", 0) == 0;
  t.synthetic_times_ = meta_u64(k::kSyntheticTimes).value_or(0) != 0;
  t.categories_inferred_ = t.meta_text(k::kCategoriesInferred);
  t.estimated_ = t.meta_text(k::kEstimated);
  return t;
}

std::string Trace::meta_text(const char* key) const {
  return reader_->meta_value(key).value_or("");
}

std::optional<int64_t> Trace::meta_int(const char* key) const {
  auto v = reader_->meta_value(key);
  if (!v || v->empty()) return std::nullopt;
  try {
    return std::stoll(*v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Trace::time_text(uint64_t ts) const {
  return format_time_point(ts >= origin_ns_ ? ts - origin_ns_ : 0, synthetic_times_);
}

bool Trace::stack_truncated(uint64_t stack_id) const {
  // An imported snapshot's depth is its deepest frames list, not a capture limit.
  if (stack_id == 0 || stack_depth_ <= 0 || imported_) return false;
  const std::vector<uint64_t> ips = reader_->stack(stack_id);
  if (ips.empty() || ips.size() < static_cast<size_t>(stack_depth_)) return false;
  const auto& fs = frames(ips.back());  // the outermost address; its frames innermost first
  if (fs.empty()) return true;
  const std::string_view f = fs.back().function;
  for (std::string_view entry : {"_start", "start_thread", "thread_start", "clone", "clone3",
                                 "__clone", "__clone3", "__clone_internal", "<module>"})
    if (f == entry) return false;  // a process's, a thread's, or a Python script's start
  return f.substr(0, 12) != "__libc_start";
}

const DeviceRef& Trace::device(std::string_view spec) const {
  std::string want(spec);
  const size_t slash = want.find('/') + 1;  // a merged trace's "rank1/cuda" is rank1's cuda:0
  if (want.substr(slash) == "cuda") want += ":0";
  if (want.substr(slash) == "cpu:0") want.resize(want.size() - 2);
  for (const DeviceRef& d : devices_)
    if (d.name == want || d.description == spec) return d;
  std::string known;
  for (const DeviceRef& d : devices_) known += (known.empty() ? "" : ", ") + d.name;
  throw std::invalid_argument("no device '" + std::string(spec) +
                              "' in the trace (it has: " + (known.empty() ? "none" : known) + ")");
}

const DeviceRef* Trace::device_by_id(int64_t id) const {
  for (const DeviceRef& d : devices_)
    if (d.id == id) return &d;
  return nullptr;
}

const std::vector<store::ResolvedFrame>& Trace::frames(uint64_t ip) const {
  auto it = frames_.find(ip);
  if (it == frames_.end()) it = frames_.emplace(ip, reader_->frames(ip)).first;
  return it->second;
}

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string frame_label(const store::ResolvedFrame& f) {
  if (f.file.empty() || f.file == "??") return f.function.empty() ? "??" : f.function;
  return f.function + " (" + file_basename(f.file) + ":" + std::to_string(f.line) + ")";
}

}  // namespace

template <class F>
void Trace::for_each_frame(uint64_t stack_id, F&& f) const {
  if (stack_id == 0) return;
  bool innermost = true;  // still among the recorder's own frames
  for (uint64_t ip : reader_->stack(stack_id)) {
    const auto& fs = frames(ip);
    if (fs.empty()) {
      innermost = false;
      f(ip, nullptr);
    }
    for (const store::ResolvedFrame& r : fs) {
      if (innermost && is_recorder_frame(r)) continue;
      innermost = false;
      f(ip, &r);
    }
  }
}

void Trace::set_category_rules(std::shared_ptr<const CategoryRules> rules) {
  category_rules_ = std::move(rules);
  category_cache_ = category_rules_ ? std::make_unique<CategoryCache>() : nullptr;
}

std::string Trace::category_label(uint64_t stack_id, events::Category recorded) const {
  if (!category_rules_) return std::string(events::category_name(recorded));
  {
    std::lock_guard<std::mutex> lock(category_cache_->mutex);
    auto it = category_cache_->by_stack.find(stack_id);
    if (it != category_cache_->by_stack.end()) return it->second;
  }
  std::string c = category_rules_->category_of(resolved_frames(stack_id));
  std::lock_guard<std::mutex> lock(category_cache_->mutex);
  return category_cache_->by_stack.emplace(stack_id, std::move(c)).first->second;
}

std::optional<store::ResolvedFrame> Trace::site_frame(uint64_t stack_id) const {
  std::vector<const store::ResolvedFrame*> fs;
  for_each_frame(stack_id, [&](uint64_t, const store::ResolvedFrame* r) {
    if (r) fs.push_back(r);
  });
  if (fs.empty()) return std::nullopt;
  return pick_site(fs, frames_mode_);
}

void Trace::set_frames(Frames frames) {
  if (frames == frames_mode_) return;
  frames_mode_ = frames;
  sites_.clear();
}

const Site& Trace::site(uint64_t stack_id) const {
  auto it = sites_.find(stack_id);
  if (it != sites_.end()) return it->second;
  Site s{"(no stack)", "(no stack)"};
  if (stack_id != 0) {
    if (auto f = site_frame(stack_id)) {
      s = {f->function + "@" + file_basename(f->file), frame_label(*f)};
    } else if (std::vector<uint64_t> ips = reader_->stack(stack_id); !ips.empty()) {
      s = {hex(ips.front()), hex(ips.front())};
    }
  }
  return sites_.emplace(stack_id, std::move(s)).first->second;
}

std::vector<std::string> Trace::stack_frames(uint64_t stack_id) const {
  std::vector<std::string> out;
  for_each_frame(stack_id, [&](uint64_t ip, const store::ResolvedFrame* r) {
    out.push_back(r ? frame_label(*r) : hex(ip));
  });
  return out;
}

std::vector<store::ResolvedFrame> Trace::resolved_frames(uint64_t stack_id) const {
  std::vector<store::ResolvedFrame> out;
  for_each_frame(stack_id, [&](uint64_t, const store::ResolvedFrame* r) {
    if (r) out.push_back(*r);
  });
  return out;
}

std::vector<bool> Trace::library_frames(uint64_t stack_id) const {
  std::vector<bool> out;
  for_each_frame(stack_id, [&](uint64_t, const store::ResolvedFrame* r) {
    out.push_back(!r || r->function.empty() || is_library_frame(*r));  // unresolved: never a site
  });
  return out;
}

}  // namespace tidemark::analysis
