// PYTORCH_CUDA_ALLOC_CONF for the replay (replay.h): PyTorch's keys, PyTorch's refusals, and
// the settings a trace was recorded under.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "profiler/replay/replay.h"
#include "tensorlib/base/error.h"

namespace tidemark::replay {

namespace {

using tl::memory::conf_syntax::split_top_level;
using tl::memory::conf_syntax::trim;

// Keys PyTorch's CUDA allocator takes that change nothing the replay models.
constexpr std::string_view kIgnoredKeys[] = {
    "pinned_use_cuda_host_register",     "pinned_num_register_threads",
    "pinned_use_host_register",          "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",     "release_lock_on_cudamalloc",
    "graph_capture_record_stream_reuse", "expandable_segments_handle_type"};
constexpr std::string_view kModelledKeys[] = {
    "max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
    "garbage_collection_threshold", "expandable_segments"};

tl::memory::AllocatorConfig parse_modelled(const std::string& conf, std::string_view what) {
  try {
    return tl::memory::AllocatorConfig::parse(conf);
  } catch (const tl::Error& e) {
    std::string msg = e.what();
    constexpr std::string_view prefix = "TL_ALLOC_CONF: ";
    if (msg.starts_with(prefix)) msg.erase(0, prefix.size());
    throw SettingsError(std::string(what) + ": " + msg);
  }
}

}  // namespace

std::string AllocConf::text() const {
  return config.to_string();
}

AllocConf parse_alloc_conf(std::string_view conf) {
  AllocConf out;
  std::string modelled;
  for (std::string_view item : split_top_level(conf)) {
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw SettingsError("--alloc-conf: expected key:value, got '" + std::string(item) + "'");
    std::string_view key = trim(item.substr(0, colon));
    std::string_view value = trim(item.substr(colon + 1));
    if (key == "backend") {
      if (value == "native") {
        out.ignored.emplace_back(item);
        continue;
      }
      if (value == "cudaMallocAsync")
        throw SettingsError(
            "--alloc-conf: backend:cudaMallocAsync hands memory to CUDA's own pool allocator, "
            "which the replay does not model (it replays PyTorch's native caching allocator)");
      throw SettingsError(
          "--alloc-conf: Unknown allocator backend, options should be native or "
          "cudaMallocAsync, got '" +
          std::string(value) + "'");
    }
    if (std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), key) !=
        std::end(kIgnoredKeys)) {
      out.ignored.emplace_back(item);
      continue;
    }
    if (std::find(std::begin(kModelledKeys), std::end(kModelledKeys), key) ==
        std::end(kModelledKeys))
      throw SettingsError("--alloc-conf: Unrecognized key '" + std::string(key) +
                          "' in CUDA allocator config (PyTorch refuses it too; the keys are "
                          "max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, "
                          "garbage_collection_threshold, expandable_segments, backend, and the "
                          "pinned_* keys)");
    if (!modelled.empty()) modelled += ",";
    modelled += std::string(key) + ":" + std::string(value);
  }
  out.config = parse_modelled(modelled, "--alloc-conf");
  return out;
}

AllocConf recorded_settings(const std::string& meta_value) {
  constexpr std::string_view kRaw = "PYTORCH_CUDA_ALLOC_CONF:";
  std::string_view v = trim(meta_value);
  // A snapshot's dict without the raw PYTORCH_CUDA_ALLOC_CONF entry (a PyTorch that leaves it
  // out when the variable is unset): its structured keys are read the same way.
  if (!v.starts_with(kRaw) &&
      (v.starts_with("max_split_size:") || v.find(",max_split_size:") != std::string_view::npos))
    return recorded_settings(std::string(kRaw) + "," + std::string(v));
  if (!v.starts_with(kRaw)) {
    // tensorlib's TL_ALLOC_CONF, as given.
    try {
      return parse_alloc_conf(v);
    } catch (const SettingsError& e) {
      throw SettingsError(std::string("the trace's allocator settings '") + meta_value +
                          "' cannot be read (" + e.what() + "); give --alloc-conf");
    }
  }
  // A PyTorch snapshot's allocator_settings dict, rendered `key:value,...` by the importer. The
  // raw PYTORCH_CUDA_ALLOC_CONF comes first and may itself hold commas, so the structured keys
  // PyTorch derived from it are read instead, each found as ",key:" after the raw text.
  auto field = [&](std::string_view key) -> std::optional<std::string_view> {
    std::string needle = "," + std::string(key) + ":";
    size_t at = v.rfind(needle);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = v.substr(at + needle.size());
    return split_top_level(rest).front();
  };
  AllocConf out;
  auto& c = out.config;
  bool structured = false;
  if (auto s = field("max_split_size")) {
    structured = true;
    char* end = nullptr;
    std::string t(*s);
    long long bytes = std::strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() + t.size() && bytes > 0) c.max_split_size = static_cast<size_t>(bytes);
  }
  if (auto s = field("max_non_split_rounding_size")) {
    std::string t(*s);
    char* end = nullptr;
    long long bytes = std::strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() + t.size() && bytes >= 0)
      c.max_non_split_rounding = static_cast<size_t>(bytes);
  }
  if (auto s = field("garbage_collection_threshold")) {
    structured = true;
    std::string t(*s);
    char* end = nullptr;
    double g = std::strtod(t.c_str(), &end);
    if (end == t.c_str() + t.size() && g > 0.0 && g < 1.0) c.garbage_collection_threshold = g;
  }
  if (auto s = field("expandable_segments")) {
    structured = true;
    c.expandable_segments = *s == "True";
  }
  if (auto s = field("roundup_power2_divisions"); s && s->size() >= 2 && s->front() == '{') {
    // {1:0,2:0,4:0,...}: interval start in MiB -> divisions.
    for (std::string_view item : split_top_level(s->substr(1, s->size() - 2))) {
      size_t colon = item.find(':');
      if (colon == std::string_view::npos) continue;
      std::string mb(trim(item.substr(0, colon))), d(trim(item.substr(colon + 1)));
      char* e1 = nullptr;
      char* e2 = nullptr;
      unsigned long long m = std::strtoull(mb.c_str(), &e1, 10);
      unsigned long long div = std::strtoull(d.c_str(), &e2, 10);
      if (e1 != mb.c_str() + mb.size() || e2 != d.c_str() + d.size() || m == 0) continue;
      // As PyTorch (and --alloc-conf) take them: 0, or a power of two up to 1024. A file's other
      // value (2^55 would wrap the rounding to 0) is kept in the trace and replayed as 0.
      if (div != 0 && (div > 1024 || (div & (div - 1)) != 0)) {
        out.ignored.push_back("roundup_power2_divisions " + mb + ":" + d +
                              " (not 0 or a power of two up to 1024; replayed as 0)");
        continue;
      }
      size_t index = std::min<size_t>(std::bit_width(m) - 1, c.kRoundupIntervals - 1);
      c.roundup_power2_divisions[index] = div;
    }
  }
  if (structured) return out;
  // An older snapshot with only the raw text.
  size_t end = v.find(',');
  return parse_alloc_conf(
      v.substr(kRaw.size(), end == std::string_view::npos ? end : end - kRaw.size()));
}

}  // namespace tidemark::replay
