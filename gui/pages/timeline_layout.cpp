#include "gui/pages/timeline_layout.h"

#include <algorithm>
#include <cmath>

namespace tidemark::gui {

QRect TimelineLayout::plot() const {
  const int scopes = scope_rows ? scope_rows * kScopeRow + 2 : 0;
  return QRect(kLeftMargin, kTopMargin, std::max(1, size.width() - kLeftMargin - kRightMargin),
               std::max(1, size.height() - kTopMargin - scopes - kSyncHeight - kBottomMargin - 2));
}

QRect TimelineLayout::lane(int lane) const {
  const QRect p = plot();
  if (lanes <= 1) return p;
  const int h = std::max(1, (p.height() - kLaneGap * (lanes - 1)) / lanes);
  return QRect(p.left(), p.top() + std::clamp(lane, 0, lanes - 1) * (h + kLaneGap), p.width(), h);
}

QRect TimelineLayout::scopeLane() const {
  const QRect p = plot();
  return QRect(p.left(), p.bottom() + 2, p.width(), scope_rows * kScopeRow);
}

QRect TimelineLayout::syncLane() const {
  const QRect p = plot();
  const int top = scope_rows ? scopeLane().bottom() + 3 : p.bottom() + 2;
  return QRect(p.left(), top, p.width(), kSyncHeight);
}

int TimelineLayout::valueToY(int64_t bytes, int lane_index) const {
  const QRect p = lane(lane_index);
  const double f = double(bytes) / double(std::max<int64_t>(1, y_max));
  return p.bottom() - int(std::lround(f * (p.height() - 1)));
}

double TimelineLayout::tsToX(uint64_t ts) const {
  const QRect p = plot();
  return p.left() + (double(ts) - double(from)) / double(to - from) * p.width();
}

uint64_t TimelineLayout::xToTs(double x) const {
  const QRect p = plot();
  const double t = double(from) + (x - p.left()) / p.width() * double(to - from);
  return uint64_t(std::clamp(t, double(from), double(to)));
}

}  // namespace tidemark::gui
