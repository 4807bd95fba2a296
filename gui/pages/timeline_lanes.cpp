#include "gui/pages/timeline_lanes.h"

#include <algorithm>

namespace tidemark::gui {

RankLanes::RankLanes(const TraceData& data) {
  for (const analysis::DeviceRef& d : data.devices)
    if (d.rank && std::find(ranks_.begin(), ranks_.end(), *d.rank) == ranks_.end())
      ranks_.push_back(*d.rank);
  std::sort(ranks_.begin(), ranks_.end());
  if (count() == 1) return;
  for (const analysis::DeviceRef& d : data.devices)
    lane_of_device_.push_back(
        d.rank ? int(std::find(ranks_.begin(), ranks_.end(), *d.rank) - ranks_.begin()) : 0);
}

QString RankLanes::label(int lane) const {
  if (count() == 1) return {};
  return QStringLiteral("rank %1").arg(ranks_[size_t(std::clamp(lane, 0, count() - 1))]);
}

const RankLanes::Steps& RankLanes::steps(const TraceData& data, int lane) const {
  if (count() > 1) {
    const auto it = data.rank_steps.find(ranks_[size_t(std::clamp(lane, 0, count() - 1))]);
    if (it != data.rank_steps.end()) return it->second;
  }
  return data.steps;
}

}  // namespace tidemark::gui
