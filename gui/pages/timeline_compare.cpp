// TimelineCompare (timeline_compare.h): the Compare overlay of a timeline.
#include "gui/pages/timeline_compare.h"

#include <algorithm>
#include <cmath>

namespace tidemark::gui {

QColor TimelineCompare::color(size_t d) {
  return d == 0 ? QColor(230, 85, 13) : QColor::fromHsv(int(20 + 67 * d) % 360, 230, 200);
}

void TimelineCompare::set(TraceDataPtr other, const TraceData* mine, Align alignment) {
  other_ = std::move(other);  // a query running meanwhile holds the cache it used
  cache_ = std::make_shared<analysis::TimelineCache>();
  align(mine, alignment);
}

void TimelineCompare::align(const TraceData* mine, Align alignment) {
  align_ = alignment;
  offset_ = 0;
  if (mine && other_) {
    uint64_t a = mine->origin_ns, b = other_->origin_ns;
    if (alignment == Align::first_step && !mine->steps.empty() && !other_->steps.empty()) {
      a = mine->steps.front().second;
      b = other_->steps.front().second;
    }
    offset_ = int64_t(b) - int64_t(a);
  }
}

uint64_t TimelineCompare::end(const TraceData* mine) const {
  uint64_t end = mine ? mine->end_ns : 0;
  if (mine && other_) {
    const int64_t theirs = int64_t(other_->end_ns) - offset_;
    if (theirs > int64_t(end)) end = uint64_t(theirs);
  }
  return end;
}

// The other trace's allocated (and reserved) columns as this trace draws its own -- a stroke
// from min to max, then to the last value -- dashed, at the x of the time they align with.
void TimelineCompare::draw(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes,
                           const std::vector<analysis::Timeline>& columns) const {
  const QRect plot = layout.plot();
  p.setRenderHint(QPainter::Antialiasing, false);
  for (size_t d = 0; d < columns.size(); ++d) {
    const analysis::Timeline& t = columns[d];
    const size_t n = t.width();
    if (n == 0) continue;
    const int lane = lanes.of(d);  // this trace's device d's (Note [Rank lanes])
    const std::pair<const analysis::CurveColumns*, QPen> curves[] = {
        {&t.reserved, QPen(color(d).lighter(150), 1, Qt::DotLine)},
        {&t.allocated, QPen(color(d), 1.5, Qt::DashLine)}};
    for (const auto& [c, pen] : curves) {
      QPolygonF line;
      line.reserve(int(3 * n));
      for (size_t i = 0; i < n; ++i) {
        const int64_t mine = int64_t(t.from_ts + i * t.column_ns) - offset_;
        const double x = std::floor(layout.tsToX(uint64_t(std::max<int64_t>(0, mine))));
        if (x < plot.left() - 1 || x > plot.right() + 1) continue;
        line << QPointF(x, layout.valueToY(c->min[i], lane))
             << QPointF(x, layout.valueToY(c->max[i], lane))
             << QPointF(x, layout.valueToY(c->last[i], lane));
      }
      p.setPen(pen);
      p.drawPolyline(line);
    }
  }
}

}  // namespace tidemark::gui
