// Note [Output patterns] (output_path.h).
#include "profiler/record/output_path.h"

#include <cerrno>
#include <cstdlib>

namespace tidemark::record {

namespace {

std::optional<int64_t> non_negative(const char* v) {
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno != 0 || x < 0) return std::nullopt;
  return x;
}

}  // namespace

RankEnv rank_from_env(const EnvLookup& lookup) {
  const EnvLookup get = lookup ? lookup : [](const char* name) { return std::getenv(name); };
  constexpr const char* kFamilies[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"RANK", "WORLD_SIZE"}};
  for (const auto& [rank, size] : kFamilies) {
    if (std::optional<int64_t> r = non_negative(get(rank))) {
      RankEnv out;
      out.rank = r;
      out.world_size = non_negative(get(size));
      out.variable = rank;
      return out;
    }
  }
  return {};
}

bool has_pattern(std::string_view pattern, char c) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (pattern[i + 1] == c) return true;
    if (pattern[i + 1] == '%') ++i;  // an escaped %
  }
  return false;
}

ExpandedPath expand_output_path(std::string_view pattern, int64_t pid, const RankEnv& ranks) {
  ExpandedPath out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c != '%' || (next != 'p' && next != 'r' && next != '%')) {
      out.path += c;
      continue;
    }
    ++i;
    if (next == '%') {
      out.path += '%';
    } else if (next == 'p') {
      out.path += std::to_string(pid);
    } else {
      out.rank_missing = out.rank_missing || !ranks.rank;
      out.path += std::to_string(ranks.rank.value_or(0));
    }
  }
  return out;
}

std::string shared_file_problem(std::string_view pattern, const RankEnv& ranks) {
  if (!ranks.world_size || *ranks.world_size <= 1) return {};
  if (has_pattern(pattern, 'r') || has_pattern(pattern, 'p')) return {};
  std::string size_variable = ranks.variable == "OMPI_COMM_WORLD_RANK" ? "OMPI_COMM_WORLD_SIZE"
                              : ranks.variable == "PMI_RANK"           ? "PMI_SIZE"
                                                                       : "WORLD_SIZE";
  return std::string(pattern) + ": the " + std::to_string(*ranks.world_size) +
         " ranks of this run (" + size_variable + "=" + std::to_string(*ranks.world_size) +
         ") would all write this one file; put %r (the rank) in the name, e.g. run-%r.db";
}

bool matches_output_pattern(std::string_view pattern, std::string_view name,
                            std::optional<int64_t> pid) {
  size_t n = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c == '%' && next == '%') {
      if (n >= name.size() || name[n] != '%') return false;
      ++n, ++i;
    } else if (c == '%' && (next == 'r' || next == 'p')) {
      ++i;
      size_t digits = n;
      while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
      if (digits == n) return false;
      if (next == 'p' && pid && name.substr(n, digits - n) != std::to_string(*pid)) return false;
      n = digits;
    } else {
      if (n >= name.size() || name[n] != c) return false;
      ++n;
    }
  }
  return n == name.size();
}

}  // namespace tidemark::record
