// The ranks of a distributed run side by side: each rank's peaks per device, the spread between
// the highest and the lowest rank, and what makes the difference (`tidemark summary run-*.db`,
// the `rank-imbalance` finding of profiler/diagnose/rank_imbalance.h). The ranks are several
// traces (one per rank) or one merged trace (Note [Merged devices] in merge.h), read the same
// way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

// A trace and the rank it records: its meta `rank`, else the number in its file name.
struct RankedTrace {
  int64_t rank = 0;
  const Trace* trace = nullptr;
};
// The rank of a trace that is one rank's (empty for a merged trace, or when nothing says).
// Throws MergeError when the file name is ambiguous.
std::optional<int64_t> trace_rank(const Trace& trace);

// One device of one rank.
struct RankDevice {
  int64_t rank = 0;
  std::string device;  // its name in the rank's own trace: "cpu", "cuda:0"
  const Trace* trace = nullptr;
  const DeviceRef* ref = nullptr;
};
// The devices of each rank: every device of each trace, or of a merged trace those of each rank.
std::vector<RankDevice> rank_devices(const std::vector<RankedTrace>& traces);
std::vector<RankDevice> rank_devices(const Trace& merged);

// A group (a site, a category) live at the highest rank's peak and at the lowest's.
struct GroupDelta {
  std::string key, label;
  int64_t high_bytes = 0, low_bytes = 0;
  int64_t delta() const { return high_bytes - low_bytes; }
};

// One curve's peak on one device name across the ranks.
struct RankSpread {
  std::string device;                              // "cuda:0": the same device of every rank
  store::Curve curve = store::Curve::allocated;    // allocated or reserved
  std::vector<std::pair<int64_t, int64_t>> peaks;  // (rank, peak bytes), in rank order
  int64_t high_rank = 0, low_rank = 0, high_bytes = 0, low_bytes = 0;
  double ratio() const;  // high / low (infinity when low is 0 and high is not; 1 when both 0)
  // What grew most from the lowest rank's peak to the highest's: a site (allocated: live
  // allocations by site; reserved: segments by site) and, for allocated, a category. Empty
  // when nothing grew (or the peaks are equal).
  std::optional<GroupDelta> site, category;
};
// Allocated and reserved spreads of every device name two ranks or more have, in device order.
std::vector<RankSpread> rank_spreads(const std::vector<RankDevice>& devices);

}  // namespace tidemark::analysis
