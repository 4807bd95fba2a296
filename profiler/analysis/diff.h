// The difference between two traces of the same program: peaks per device, and per site what
// was live at the allocated peak and what was reserved at the reserved peak (new, vanished and
// changed sites).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"

namespace tidemark::analysis {

struct DeviceDiff {
  std::string device;                 // matched by name ("cpu", "cuda:0")
  std::optional<DeviceSummary> a, b;  // empty: the device is absent from that trace
  int64_t peak_allocated_delta = 0, peak_reserved_delta = 0, final_allocated_delta = 0;
};

struct SiteDiff {
  std::string key, label;
  int64_t a_bytes = 0, b_bytes = 0;  // live at the (allocated or reserved) peak of the device
  uint64_t a_count = 0, b_count = 0;
  int64_t delta() const { return b_bytes - a_bytes; }
};

struct TraceDiff {
  std::string a_path, b_path;
  std::vector<DeviceDiff> devices;
  // Per device, sites at the allocated peak: changed (both), new (only in B), vanished (only
  // in A), each sorted by |delta| descending.
  struct Sites {
    std::string device;
    std::vector<SiteDiff> changed, added, vanished;
  };
  std::vector<Sites> sites;
  // The same for reserved memory at the reserved peak (reserved_at_peak's sites).
  std::vector<Sites> reserved_sites;
  // Categories (parameter, activation, ...) at the allocated peak, compared the same way
  // (key and label: the category's name); no entries for a device where neither trace tags
  // any category (all `unknown`).
  std::vector<Sites> categories;
};

// `by`: the sites' grouping at the allocated peak, GroupBy::site or GroupBy::line (Note
// [Source lines]); reserved memory and categories are compared as always.
TraceDiff diff(const Trace& a, const Trace& b, GroupBy by = GroupBy::site);

}  // namespace tidemark::analysis
