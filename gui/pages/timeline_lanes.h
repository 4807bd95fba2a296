// RankLanes: which lane of the timeline each device of a trace is drawn in.
//
// Note [Rank lanes]
// ~~~~~~~~~~~~~~~~~
// A merged trace (`tidemark merge`: a device per rank, DeviceRef::rank) shows each rank in a
// lane of its own, stacked top to bottom in rank order inside the plot, 6 px apart: every lane
// has the whole time axis, so a step of rank 0 lines up with rank 1's, and all lanes share one
// byte scale (the largest value of any device), so a rank that holds more reaches higher in its
// lane than the others in theirs -- the imbalance `rank-imbalance` reports is seen at a glance.
// A rank's devices (its CPU, its GPUs) share its lane, coloured by device as before, and so do
// its step lines: each rank steps on its own (Note [Steps of a rank] in analysis/steps.h). The
// selection, the highlight and the selected time cross every lane; everything drawn by value
// (curves, bands, compare overlays, peak markers) goes to its device's lane. Any other trace is
// one lane, the whole plot.
#pragma once

#include <QString>
#include <cstdint>
#include <utility>
#include <vector>

#include "gui/models/trace_data.h"

namespace tidemark::gui {

class RankLanes {
 public:
  using Steps = std::vector<std::pair<int64_t, uint64_t>>;  // (number, ts), as TraceData's

  RankLanes() = default;  // no trace: one lane
  explicit RankLanes(const TraceData& data);

  int count() const { return ranks_.size() > 1 ? int(ranks_.size()) : 1; }
  // The lane of a device (an index into TraceData::devices).
  int of(size_t device) const {
    return device < lane_of_device_.size() ? lane_of_device_[device] : 0;
  }
  QString label(int lane) const;  // "rank 1"; empty for a single lane
  // The steps whose lines a lane draws: its rank's (Note [Steps of a rank]), else the trace's.
  const Steps& steps(const TraceData& data, int lane) const;

 private:
  std::vector<int64_t> ranks_;       // of a merged trace, in order; else empty
  std::vector<int> lane_of_device_;  // empty for one lane
};

}  // namespace tidemark::gui
