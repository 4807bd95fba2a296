#include "profiler/naming/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tidemark::analysis {

namespace {

// Splits "1.5GiB" into 1.5 and "GiB"; empty when the number part is not a number.
std::optional<std::pair<double, std::string>> split(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
  std::string str(s);
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  if (end == str.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  // strtod accepts "inf", "nan" and hex; only decimal numbers here.
  for (const char* p = str.c_str(); p < end; ++p)
    if (!std::isdigit(static_cast<unsigned char>(*p)) && *p != '.' && *p != 'e' && *p != 'E' &&
        *p != '+' && *p != '-')
      return std::nullopt;
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  return std::make_pair(v, unit);
}

std::optional<uint64_t> scaled(double v, double scale) {
  double r = std::round(v * scale);
  if (!(r >= 0) || r >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(r);
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view s) {
  auto p = split(s);
  if (!p) return std::nullopt;
  std::string u = p->second;
  for (char& c : u) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Unit {
    const char* name;
    double scale;
  };
  static constexpr Unit units[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"ki", 1024.0},
      {"kb", 1e3},
      {"m", 1048576.0},
      {"mib", 1048576.0},
      {"mi", 1048576.0},
      {"mb", 1e6},
      {"g", 1073741824.0},
      {"gib", 1073741824.0},
      {"gi", 1073741824.0},
      {"gb", 1e9},
      {"t", 1099511627776.0},
      {"tib", 1099511627776.0},
      {"ti", 1099511627776.0},
      {"tb", 1e12},
  };
  for (const Unit& x : units)
    if (u == x.name) return scaled(p->first, x.scale);
  return std::nullopt;
}

std::optional<uint64_t> parse_duration_ns(std::string_view s) {
  auto p = split(s);
  if (!p) return std::nullopt;
  const std::string& u = p->second;
  if (u.empty() || u == "ns") return scaled(p->first, 1);
  if (u == "us" || u == "µs") return scaled(p->first, 1e3);
  if (u == "ms") return scaled(p->first, 1e6);
  if (u == "s") return scaled(p->first, 1e9);
  if (u == "m" || u == "min") return scaled(p->first, 60e9);
  if (u == "h") return scaled(p->first, 3600e9);
  return std::nullopt;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = std::fabs(static_cast<double>(bytes));
  int i = 0;
  while (v >= 1024 && i < 4) v /= 1024, ++i;
  char buf[48];
  if (i == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%s%.2f %s", bytes < 0 ? "-" : "", v, units[i]);
  return buf;
}

std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_time_point(uint64_t rel_ns, bool synthetic_times, int decimals) {
  char buf[48];
  if (synthetic_times)
    std::snprintf(buf, sizeof buf, "event %llu", static_cast<unsigned long long>(rel_ns / 1000));
  else
    std::snprintf(buf, sizeof buf, "%.*f s", decimals, static_cast<double>(rel_ns) / 1e9);
  return buf;
}

std::string format_dropped(uint64_t dropped, bool counted) {
  if (counted) return std::to_string(dropped) + " dropped";
  if (dropped == 0) return "an uncounted number dropped";
  return "at least " + std::to_string(dropped) + " dropped, more uncounted";
}

std::string format_duration(uint64_t ns) {
  char buf[48];
  double v = static_cast<double>(ns);
  if (ns < 1000)
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  else if (ns < 1000000)
    std::snprintf(buf, sizeof buf, "%.2f us", v / 1e3);
  else if (ns < 1000000000)
    std::snprintf(buf, sizeof buf, "%.2f ms", v / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
  return buf;
}

std::string device_name(events::DeviceId id) {
  std::string type = id.type == events::DeviceType::cuda ? "cuda" : "cpu";
  if (id.type == events::DeviceType::cpu && id.index == 0) return type;
  return type + ":" + std::to_string(id.index);
}

}  // namespace tidemark::analysis
