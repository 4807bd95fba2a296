// TimelineWidget's Compare overlay (timeline_widget.h): a second trace's curves queried for
// the same pixel columns, shifted by the alignment offset, and drawn dashed over this trace's.
#include <QPainter>
#include <cmath>

#include "gui/core/timeline_widget.h"

namespace tidemark::gui {

QColor TimelineWidget::compareColor(size_t d) {
  return d == 0 ? QColor(230, 85, 13) : QColor::fromHsv(int(20 + 67 * d) % 360, 230, 200);
}

void TimelineWidget::setCompare(TraceDataPtr other, Align align) {
  other_ = std::move(other);  // a query running meanwhile holds the cache it used
  other_cache_ = std::make_shared<analysis::TimelineCache>();
  columns_.compare.clear();
  setCompareAlign(align);
  resetView();  // the range now covers the longer of the two
}

void TimelineWidget::setCompareAlign(Align align) {
  align_ = align;
  offset_ = 0;
  if (data_ && other_) {
    uint64_t mine = data_->origin_ns, theirs = other_->origin_ns;
    if (align == Align::first_step && !data_->steps.empty() && !other_->steps.empty()) {
      mine = data_->steps.front().second;
      theirs = other_->steps.front().second;
    }
    offset_ = int64_t(theirs) - int64_t(mine);
  }
  requery();
  update();
}

uint64_t TimelineWidget::endTs() const {
  uint64_t end = data_ ? data_->end_ns : 0;
  if (data_ && other_) {
    const int64_t theirs = int64_t(other_->end_ns) - offset_;
    if (theirs > int64_t(end)) end = uint64_t(theirs);
  }
  return end;
}

// The other trace's allocated (and reserved) columns as this trace draws its own -- a stroke
// from min to max, then to the last value -- dashed, at the x of the time they align with.
void TimelineWidget::drawCompare(QPainter& p, const QRect& plot) {
  p.setRenderHint(QPainter::Antialiasing, false);
  for (size_t d = 0; d < columns_.compare.size(); ++d) {
    const analysis::Timeline& t = columns_.compare[d];
    const size_t n = t.width();
    if (n == 0) continue;
    const int lane = laneOf(d);  // this trace's device d's (Note [Rank lanes])
    const std::pair<const analysis::CurveColumns*, QPen> curves[] = {
        {&t.reserved, QPen(compareColor(d).lighter(150), 1, Qt::DotLine)},
        {&t.allocated, QPen(compareColor(d), 1.5, Qt::DashLine)}};
    for (const auto& [c, pen] : curves) {
      QPolygonF line;
      line.reserve(int(3 * n));
      for (size_t i = 0; i < n; ++i) {
        const int64_t mine = int64_t(t.from_ts + i * t.column_ns) - offset_;
        const double x = std::floor(tsToX(uint64_t(std::max<int64_t>(0, mine))));
        if (x < plot.left() - 1 || x > plot.right() + 1) continue;
        line << QPointF(x, valueToY(c->min[i], lane)) << QPointF(x, valueToY(c->max[i], lane))
             << QPointF(x, valueToY(c->last[i], lane));
      }
      p.setPen(pen);
      p.drawPolyline(line);
    }
  }
}

}  // namespace tidemark::gui
