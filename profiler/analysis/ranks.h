// The ranks of a distributed run side by side: each rank's peaks per device, the spread between
// the highest and the lowest rank, and what makes the difference (`tidemark summary run-*.db`,
// the `rank-imbalance` finding). The ranks are several traces (one per rank) or one merged trace
// (Note [Merged devices] in merge.h), read the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/diagnose.h"
#include "profiler/analysis/memory.h"

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

// Note [Rank imbalance]
// One rank's peak (allocated or reserved) on a device above the others' by at least
// kImbalanceShare of that peak and kImbalanceMinBytes: the lowest rank shows what the program
// needs, the difference is what the highest rank holds beyond it (rank 0's extra state, uneven
// gradient buckets, a larger shard). Below that, ranks differ by noise (a batch of another
// size, the allocator's rounding). The finding names the rank, the bytes and the site (and
// category) that grew most between the two peaks; its share is the difference over the high
// rank's peak (Note [Severity]).
inline constexpr double kImbalanceShare = 0.10;
inline constexpr int64_t kImbalanceMinBytes = int64_t{1} << 20;
// The findings over the ranks' devices, with device named `rank<R>/<device>` and severity set.
std::vector<Finding> rank_imbalance(const std::vector<RankDevice>& devices);

namespace detail {
// The registered detector: on a merged trace; skipped on one rank's trace (meta `rank`); silent
// on a trace of no distributed run.
void detect_rank_imbalance(const Trace& trace, Diagnosis& out);
}  // namespace detail

}  // namespace tidemark::analysis
