#include "tensorlib/memory/alloc_config.h"

#include <bit>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "tensorlib/base/error.h"

namespace tl::memory {

namespace {

constexpr std::string_view kKeys =
    "max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, "
    "garbage_collection_threshold, expandable_segments";
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMaxMb = size_t{1} << 30;  // 1 PiB: keeps MiB -> bytes from overflowing

using conf_syntax::split_top_level;
using conf_syntax::trim;

bool parse_uint(std::string_view s, size_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

size_t parse_divisions(std::string_view key, std::string_view v) {
  size_t d = 0;
  TL_CHECK(parse_uint(v, d) && (d == 0 || std::has_single_bit(d)) && d <= 1024,
           "TL_ALLOC_CONF: ", key, " divisions must be 0 or a power of two up to 1024, got '", v,
           "'");
  return d;
}

void parse_roundup(std::string_view v, AllocatorConfig& c) {
  constexpr std::string_view key = "roundup_power2_divisions";
  if (v.empty() || v.front() != '[') {
    c.roundup_power2_divisions.fill(parse_divisions(key, v));
    return;
  }
  TL_CHECK(v.back() == ']', "TL_ALLOC_CONF: ", key,
           " expects a value or a list like [256:1,512:2,>:8], got '", v, "'");
  std::string_view body = v.substr(1, v.size() - 2);
  size_t next = 0;  // first interval not yet given a value
  bool saw_rest = false;
  for (std::string_view item : split_top_level(body)) {
    TL_CHECK(!saw_rest, "TL_ALLOC_CONF: ", key, ": '>' must be the last entry, in '", v, "'");
    size_t colon = item.find(':');
    TL_CHECK(colon != std::string_view::npos, "TL_ALLOC_CONF: ", key,
             " entries must be size_mb:divisions or >:divisions, got '", item, "'");
    std::string_view size = trim(item.substr(0, colon));
    size_t divisions = parse_divisions(key, trim(item.substr(colon + 1)));
    if (size == ">") {
      for (size_t i = next; i < AllocatorConfig::kRoundupIntervals; ++i)
        c.roundup_power2_divisions[i] = divisions;
      next = AllocatorConfig::kRoundupIntervals;
      saw_rest = true;
      continue;
    }
    size_t mb = 0;
    TL_CHECK(parse_uint(size, mb) && std::has_single_bit(mb), "TL_ALLOC_CONF: ", key,
             " interval sizes must be powers of two (in MiB) or '>', got '", size, "'");
    size_t index = std::min<size_t>(std::bit_width(mb) - 1, AllocatorConfig::kRoundupIntervals - 1);
    TL_CHECK(index >= next, "TL_ALLOC_CONF: ", key, " interval sizes must increase, got '", size,
             "' after a larger one in '", v, "'");
    // An entry covers its own interval and any earlier one no entry has covered yet.
    for (size_t i = next; i <= index; ++i) c.roundup_power2_divisions[i] = divisions;
    next = index + 1;
  }
}

size_t parse_mb(std::string_view key, std::string_view v, size_t minimum) {
  size_t mb = 0;
  TL_CHECK(parse_uint(v, mb) && mb <= kMaxMb, "TL_ALLOC_CONF: ", key,
           " must be a whole number of MiB, got '", v, "'");
  TL_CHECK(mb >= minimum, "TL_ALLOC_CONF: ", key, " must be >= ", minimum, ", got ", v);
  return mb * kMiB;
}

}  // namespace

namespace conf_syntax {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    } else if (s[i] == '[' || s[i] == '{') {
      ++depth;
    } else if ((s[i] == ']' || s[i] == '}') && depth > 0) {
      --depth;
    }
  }
  return out;
}

}  // namespace conf_syntax

AllocatorConfig AllocatorConfig::parse(std::string_view conf) {
  AllocatorConfig c;
  for (std::string_view item : split_top_level(conf)) {
    if (item.empty()) continue;
    size_t colon = item.find(':');
    TL_CHECK(colon != std::string_view::npos, "TL_ALLOC_CONF: expected key:value, got '", item,
             "'");
    std::string_view key = trim(item.substr(0, colon));
    std::string_view value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      c.max_split_size = parse_mb(key, value, 20);
    } else if (key == "max_non_split_rounding_mb") {
      c.max_non_split_rounding = parse_mb(key, value, 0);
    } else if (key == "roundup_power2_divisions") {
      parse_roundup(value, c);
    } else if (key == "garbage_collection_threshold") {
      std::string s(value);
      char* end = nullptr;
      double t = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
      TL_CHECK(!s.empty() && end == s.c_str() + s.size() && t > 0.0 && t < 1.0,
               "TL_ALLOC_CONF: garbage_collection_threshold must be > 0 and < 1, got '", value,
               "'");
      c.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      TL_CHECK(value == "True" || value == "False",
               "TL_ALLOC_CONF: expandable_segments must be True or False, got '", value, "'");
      c.expandable_segments = value == "True";
    } else {
      TL_CHECK(false, "TL_ALLOC_CONF: unknown key '", key, "' (expected one of ", kKeys, ")");
    }
  }
  return c;
}

AllocatorConfig AllocatorConfig::from_env() {
  const char* conf = std::getenv("TL_ALLOC_CONF");
  return conf ? parse(conf) : AllocatorConfig{};
}

size_t AllocatorConfig::divisions_for(size_t size) const {
  size_t mb = size >> 20;
  size_t index = mb == 0 ? 0 : std::min<size_t>(std::bit_width(mb) - 1, kRoundupIntervals - 1);
  return roundup_power2_divisions[index];
}

std::string AllocatorConfig::to_string() const {
  AllocatorConfig d;
  std::ostringstream os;
  const char* sep = "";
  if (max_split_size != d.max_split_size) {
    os << sep << "max_split_size_mb:" << (max_split_size >> 20);
    sep = ",";
  }
  if (max_non_split_rounding != d.max_non_split_rounding) {
    os << sep << "max_non_split_rounding_mb:" << (max_non_split_rounding >> 20);
    sep = ",";
  }
  if (roundup_power2_divisions != d.roundup_power2_divisions) {
    os << sep << "roundup_power2_divisions:[";
    for (size_t i = 0; i < kRoundupIntervals; ++i)
      os << (i ? "," : "")
         << (i + 1 == kRoundupIntervals ? std::string(">") : std::to_string(size_t{1} << i)) << ":"
         << roundup_power2_divisions[i];
    os << "]";
    sep = ",";
  }
  if (garbage_collection_threshold != d.garbage_collection_threshold) {
    os << sep << "garbage_collection_threshold:" << garbage_collection_threshold;
    sep = ",";
  }
  if (expandable_segments) os << sep << "expandable_segments:True";
  return os.str();
}

}  // namespace tl::memory
