// AllocatorConfig: the caching allocator's tunables, parsed from TL_ALLOC_CONF with
// PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax (`key:value,key:value`). docs/allocator.md lists
// every key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tl::memory {

struct AllocatorConfig {
  // Power-of-two size intervals that roundup_power2_divisions can tune separately:
  // [0, 2 MiB), [2 MiB, 4 MiB), ..., [32 GiB, inf) -- interval i starts at 2^i MiB.
  static constexpr size_t kRoundupIntervals = 16;

  size_t max_split_size = SIZE_MAX;                                  // bytes; SIZE_MAX = unlimited
  size_t max_non_split_rounding = size_t{20} << 20;                  // bytes
  std::array<size_t, kRoundupIntervals> roundup_power2_divisions{};  // 0 or 1 = plain 512 B
  double garbage_collection_threshold = 0.0;                         // 0 = off
  bool expandable_segments = false;

  /// Parses `key:value,...`; throws tl::Error naming the key, the value and what is allowed.
  static AllocatorConfig parse(std::string_view conf);
  /// parse(getenv("TL_ALLOC_CONF")), or the defaults when it is unset.
  static AllocatorConfig from_env();

  /// The divisions that apply to a (>= 512 B) request of `size` bytes.
  size_t divisions_for(size_t size) const;
  /// The settings in TL_ALLOC_CONF syntax (only keys that differ from the defaults).
  std::string to_string() const;
};

// The syntax of `key:value,key:value` settings, shared with readers of PyTorch's own
// (profiler/replay): surrounding blanks removed; split on commas outside [] and {}.
namespace conf_syntax {
std::string_view trim(std::string_view s);
std::vector<std::string_view> split_top_level(std::string_view s);
}  // namespace conf_syntax

}  // namespace tl::memory
