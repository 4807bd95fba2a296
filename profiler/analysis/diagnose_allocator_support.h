// Helpers shared by the detectors of views, copies and the allocator (diagnose_allocator.cpp,
// diagnose_views.cpp). Internal: not part of the installed interface.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis/diagnose.h"
#include "profiler/naming/units.h"
#include "profiler/store/event_tables.h"
#include "tensorlib/memory/sizes.h"

namespace tidemark::analysis::detail {

// The allocator's own granularity (docs/allocator.md, tensorlib/memory/sizes.h), signed as
// the curves are: blocks above kSmallSize come from the large pool, and a large request under
// 10 MiB gets a kLargeBuffer segment. Cached memory below one such segment is the allocator's
// normal rounding, not a pitfall.
constexpr auto kSmallSize = static_cast<int64_t>(tl::memory::kSmallSize);
constexpr auto kLargeBuffer = static_cast<int64_t>(tl::memory::kLargeBuffer);

// "1,234,567"
inline std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// "4.00 MiB (4,194,304 bytes)"
inline std::string bytes_text(int64_t bytes) {
  return format_bytes(bytes) + " (" + with_commas(bytes) + " bytes)";
}

inline std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

// Fills a finding's site and stack from a stack id (Note [Allocation site]).
inline void set_site(const Trace& trace, uint64_t stack_id, Finding& f) {
  f.site = stack_id ? trace.site(stack_id).label : std::string();
  f.stack = trace.stack_frames(stack_id);
}

inline std::string device_label(const Trace& trace, int64_t device_id) {
  const DeviceRef* d = trace.device_by_id(device_id);
  return d ? d->name : "device " + std::to_string(device_id);
}

// The steps' start times (absolute), in order.
inline std::vector<uint64_t> step_times(const Trace& trace) {
  std::vector<uint64_t> out;
  store::for_each_step(trace.reader(), [&](const store::StepRow& r) { out.push_back(r.ts); });
  return out;
}

}  // namespace tidemark::analysis::detail
