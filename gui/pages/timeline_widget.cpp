#include "gui/pages/timeline_widget.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <string>

#include "gui/models/table_models.h"
#include "gui/pages/tooltip.h"

namespace tidemark::gui {

namespace {

constexpr int kLeftMargin = TimelineLayout::kLeftMargin;
constexpr int kTopMargin = TimelineLayout::kTopMargin;
constexpr int kScopeRow = TimelineLayout::kScopeRow;
constexpr int kMaxScopeRows = 6;
constexpr uint64_t kMinSpanNs = 1000;

// 1, 2, 5 times a power of `base` (10 for times; bytes use powers of 2 via 1024 steps).
double nice_step(double range, int ticks) {
  const double raw = range / std::max(1, ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}
double nice_byte_step(double range, int ticks) {
  const double raw = range / std::max(1, ticks);
  double unit = 1;
  while (unit * 1024 <= raw) unit *= 1024;
  for (double m : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0})
    if (raw <= m * unit) return m * unit;
  return 1024 * unit;
}

}  // namespace

QColor TimelineWidget::allocatedColor(size_t d) {
  return d == 0 ? QColor(31, 119, 180) : QColor::fromHsv(int(200 + 67 * d) % 360, 200, 190);
}
QColor TimelineWidget::activeColor(size_t d) {
  return d == 0 ? QColor(44, 160, 44) : QColor::fromHsv(int(120 + 67 * d) % 360, 160, 170);
}
QColor TimelineWidget::reservedColor(size_t d) {
  return d == 0 ? QColor(170, 140, 210) : QColor::fromHsv(int(280 + 67 * d) % 360, 90, 220);
}

TimelineWidget::TimelineWidget(QueryModePtr mode, QWidget* parent)
    : QWidget(parent),
      mode_(mode ? std::move(mode) : std::make_shared<QueryMode>()),
      bands_(mode_,
             [this](Stacking) {
               requery();
               emit bandsReady();
             }),
      columns_query_(mode_, [this](Columns c) { applyColumns(std::move(c)); }) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumSize(320, 160);
}

TimelineWidget::~TimelineWidget() = default;  // the queries wait for nothing

void TimelineWidget::setTraceData(TraceDataPtr data) {
  if (same_trace(data_.get(), data.get())) {
    // A later stage of the same trace (tables, scopes), or what a poll of a followed trace
    // read: keep the view and the columns; a view that showed the end extends to the new end.
    const int rows = scopeRows();
    const uint64_t old_end = endTs();
    const bool refolded = data->frames != data_->frames;
    bands_.setTrace(data);
    data_ = std::move(data);
    lanes_ = RankLanes(*data_);
    if (endTs() > old_end && view_to_ > old_end) {
      setView(view_from_, endTs() + 1);
      emit extended();
    }
    if (refolded) {  // another rule for sites (Note [Frames in the GUI]): other top sites
      bands_.refolded();
      if (stacking() != Stacking::none) setStacking(stacking());
    }
    if (scopeRows() != rows) requery();  // the plot's height changed
    update();
    return;
  }
  columns_query_.cancel();  // of the trace shown before
  bands_.setTrace(data);
  data_ = std::move(data);
  lanes_ = data_ ? RankLanes(*data_) : RankLanes();
  columns_ = {};
  cache_ = std::make_shared<analysis::TimelineCache>();
  if (compare_.other()) setCompareAlign(compareAlign());  // the offset depends on both traces
  resetView();
  if (stacking() != Stacking::none) setStacking(stacking());
}

int TimelineWidget::scopeRows() const {
  return data_ ? std::min(data_->scope_depth, kMaxScopeRows) : 0;
}

TimelineLayout TimelineWidget::layout() const {
  return {size(), scopeRows(), lanes_.count(), view_from_, view_to_, y_max_};
}

const std::vector<std::pair<int64_t, uint64_t>>& TimelineWidget::laneSteps(int lane) const {
  static const std::vector<std::pair<int64_t, uint64_t>> none;
  return data_ ? lanes_.steps(*data_, lane) : none;
}

void TimelineWidget::setView(uint64_t from, uint64_t to) {
  if (!data_) return;
  const uint64_t lo = data_->origin_ns, hi = std::max(endTs() + 1, lo + kMinSpanNs);
  uint64_t span = std::clamp<uint64_t>(to > from ? to - from : 1, kMinSpanNs, hi - lo);
  from = std::clamp<uint64_t>(from, lo, hi - span);
  view_from_ = from;
  view_to_ = from + span;
  requery();
  update();
  emit viewChanged(view_from_, view_to_);
}
void TimelineWidget::resetView() {
  if (!data_) return;
  setView(data_->origin_ns, std::max(endTs() + 1, data_->origin_ns + kMinSpanNs));
}
void TimelineWidget::zoomAround(uint64_t ts, double factor) {
  const double span = double(view_to_ - view_from_) * factor;
  const double left = double(ts) - (double(ts) - double(view_from_)) * factor;
  setView(uint64_t(std::max(0.0, left)), uint64_t(std::max(0.0, left + span)));
}
void TimelineWidget::panByFraction(double f) {
  const double shift = double(view_to_ - view_from_) * f;
  const double from = std::max(0.0, double(view_from_) + shift);
  setView(uint64_t(from), uint64_t(from) + (view_to_ - view_from_));
}
void TimelineWidget::setHighlight(uint64_t from, uint64_t to) {
  // The same range again (its details shown again under another frames rule) keeps the zoom
  // the user chose since; a new one out of view is brought into view, with some context.
  const bool again = highlight_ == std::pair<uint64_t, uint64_t>{from, to};
  highlight_ = {from, to};
  if (!again && (to < view_from_ || from > view_to_)) {
    const uint64_t span = std::max<uint64_t>(to - from, (view_to_ - view_from_) / 4);
    setView(from > span ? from - span : 0, to + span);
  }
  update();
}
void TimelineWidget::setSelectedTime(uint64_t ts) {
  selected_ = ts;
  update();
  emit timeSelected(ts);
}

void TimelineWidget::setStacking(Stacking s) {
  if (bands_.setStacking(s)) {  // unstacked, or built before
    requery();
    update();
    if (data_ && s != Stacking::none) emit bandsReady();
    return;
  }
  if (!bands_.current()) requery();  // unstacked until the bands arrive
}

void TimelineWidget::setCompare(TraceDataPtr other, Align align) {
  compare_.set(std::move(other), data_.get(), align);
  columns_.compare.clear();
  requery();
  update();
  resetView();  // the range now covers the longer of the two
}

void TimelineWidget::setCompareAlign(Align align) {
  compare_.align(data_.get(), align);
  requery();
  update();
}

TimelineWidget::Columns TimelineWidget::query(const Query& q) {
  QElapsedTimer t;
  t.start();
  Columns c;
  const analysis::TimelineRequest request{q.from, q.to, q.width, /*curves_only=*/true};
  if (q.data->live) {
    q.data->live->with([&](const analysis::LiveTrace& live) {
      for (const analysis::DeviceRef& d : q.data->devices)
        c.devices.push_back(live.timeline(size_t(d.id), request));
    });
  } else {
    q.data->session->with([&](const analysis::Trace& trace) {
      for (const analysis::DeviceRef& d : q.data->devices)
        c.devices.push_back(q.cache->timeline(trace, d.id, request));
    });
  }
  if (q.bands && q.bands->size() == q.data->devices.size())
    for (size_t d = 0; d < q.bands->size(); ++d)
      c.bands.push_back((*q.bands)[d]->columns(q.from, q.to, q.width, c.devices[d].level_width_ns));
  if (q.other && q.other->session) {
    // The same columns shifted into the other trace's time (never before its clock's zero).
    const uint64_t from = uint64_t(std::max<int64_t>(0, int64_t(q.from) + q.offset));
    const uint64_t to = uint64_t(std::max<int64_t>(int64_t(from) + 1, int64_t(q.to) + q.offset));
    q.other->session->with([&](const analysis::Trace& trace) {
      // One entry per device of this trace, in its order (match_devices lists them first).
      for (const analysis::DeviceMatch& m :
           analysis::match_devices(q.data->devices, q.other->devices)) {
        if (!m.a) break;
        c.compare.emplace_back();
        if (m.b)
          c.compare.back() = q.other_cache->timeline(trace, m.b->id, {from, to, q.width, true});
      }
    });
  }
  c.ms = double(t.nsecsElapsed()) / 1e6;
  return c;
}

void TimelineWidget::requery() {
  if (!data_) return;
  const Query q{data_,
                compare_.other(),
                cache_,
                compare_.cache(),
                bands_.current(),
                compare_.offset(),
                view_from_,
                view_to_,
                size_t(plotRect().width())};
  columns_query_.request([q](const auto&) { return query(q); });
}

void TimelineWidget::applyColumns(Columns c) {
  columns_ = std::move(c);
  last_query_ms_ = columns_.ms;
  int64_t mx = 1;
  for (const auto* timelines : {&columns_.devices, &columns_.compare})
    for (const analysis::Timeline& t : *timelines)
      for (const auto* curve : {&t.allocated, &t.active, &t.reserved})
        for (int64_t v : curve->max) mx = std::max(mx, v);
  y_max_ = mx + mx / 20;  // headroom for the peak label
  update();
}

void TimelineWidget::resizeEvent(QResizeEvent*) {
  requery();
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!data_) {
    p.drawText(rect(), Qt::AlignCenter, tr("No trace"));
    return;
  }
  const TimelineLayout l = layout();
  const QRect plot = l.plot();
  drawAxes(p, l);
  p.save();
  p.setClipRect(plot.adjusted(0, -kTopMargin, 1, 1));
  if (highlight_) {
    const double x0 = l.tsToX(highlight_->first), x1 = l.tsToX(highlight_->second);
    p.fillRect(QRectF(x0, plot.top(), std::max(2.0, x1 - x0), plot.height()),
               QColor(255, 200, 0, 70));
  }
  if (range_) {
    const double x0 = l.tsToX(std::min(range_->first, range_->second));
    const double x1 = l.tsToX(std::max(range_->first, range_->second));
    p.fillRect(QRectF(x0, plot.top(), x1 - x0, plot.height()), QColor(0, 90, 255, 40));
  }
  drawCurves(p, l);
  compare_.draw(p, l, lanes_, columns_.compare);
  drawMarkers(p, l);
  bands_.drawLegend(p, l, lanes_, columns_.bands);
  if (selected_) {
    p.setPen(QPen(QColor(220, 0, 0), 1));
    const double x = l.tsToX(*selected_);
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
  }
  p.restore();
  drawScopeLane(p, l);
  drawSyncLane(p, l);
  last_paint_ms_ = double(timer.nsecsElapsed()) / 1e6;
  if (hasColumns()) emit curvesPainted();
}

void TimelineWidget::drawAxes(QPainter& p, const TimelineLayout& l) {
  const QRect plot = l.plot();
  p.setPen(QColor(120, 120, 120));
  p.drawRect(plot.adjusted(0, 0, -1, -1));
  const QFontMetrics fm = p.fontMetrics();
  // Bytes, in each lane (Note [Rank lanes]), and the lanes' names and borders.
  for (int lane = 0; lane < laneCount(); ++lane) {
    const QRect r = l.lane(lane);
    const double ystep = nice_byte_step(double(y_max_), std::max(2, r.height() / 40));
    for (double v = 0; v <= double(y_max_); v += ystep) {
      const int y = l.valueToY(int64_t(v), lane);
      p.setPen(QColor(235, 235, 235));
      p.drawLine(r.left() + 1, y, r.right() - 1, y);
      p.setPen(Qt::black);
      p.drawText(QRect(0, y - fm.height() / 2, kLeftMargin - 6, fm.height()),
                 Qt::AlignRight | Qt::AlignVCenter, bytes_text(int64_t(v)));
    }
    if (laneCount() > 1) {
      p.setPen(QColor(120, 120, 120));
      p.drawRect(r.adjusted(0, 0, -1, -1));
      p.setPen(QColor(60, 60, 60));
      p.drawText(QRect(r.right() - 120, r.top() + 2, 114, fm.height()),
                 Qt::AlignRight | Qt::AlignTop, laneLabel(lane));
    }
  }
  // Time, relative to the trace origin.
  const double span = double(view_to_ - view_from_);
  const double tstep = nice_step(span, std::max(2, plot.width() / 110));
  const double rel0 = double(view_from_ - data_->origin_ns);
  const int label_y = l.syncLane().bottom() + 2;
  for (double t = std::ceil(rel0 / tstep) * tstep; t <= rel0 + span; t += tstep) {
    const double x = l.tsToX(data_->origin_ns + uint64_t(t));
    p.setPen(QColor(200, 200, 200));
    p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 3));
    p.setPen(Qt::black);
    p.drawText(QRectF(x - 50, label_y, 100, fm.height()), Qt::AlignHCenter,
               QString::fromStdString(data_->time_text(uint64_t(t))));
  }
  // Legend.
  int x = plot.left();
  for (size_t d = 0; d < data_->devices.size(); ++d) {
    const std::pair<QString, QColor> items[] = {
        {QString::fromStdString(data_->devices[d].name) + " allocated", allocatedColor(d)},
        {"active", activeColor(d)},
        {"reserved", reservedColor(d)}};
    for (const auto& [label, color] : items) {
      p.fillRect(x, 6, 10, 10, color);
      p.setPen(Qt::black);
      p.drawText(x + 14, 15, label);
      x += 24 + fm.horizontalAdvance(label);
    }
  }
  if (const TraceDataPtr& other = compare_.other()) {
    const QString label =
        tr("%1 (dashed)").arg(QFileInfo(QString::fromStdString(other->path)).fileName());
    p.setPen(QPen(compareColor(0), 2, Qt::DashLine));
    p.drawLine(x, 11, x + 14, 11);
    p.setPen(Qt::black);
    p.drawText(x + 18, 15, label);
    x += 28 + fm.horizontalAdvance(label);
  }
  p.drawText(QRect(x, 2, plot.right() - x, kTopMargin - 4), Qt::AlignRight | Qt::AlignVCenter,
             tr("wheel: zoom  drag: pan  shift+drag: select  0: reset"));
}

// One column per pixel: a vertical stroke from the column's min to its max, then on to its
// last value, so spikes narrower than a pixel stay visible (the LOD rows keep min and max).
void TimelineWidget::drawCurves(QPainter& p, const TimelineLayout& l) {
  const QRect plot = l.plot();
  p.setRenderHint(QPainter::Antialiasing, false);
  for (size_t d = 0; d < columns_.devices.size(); ++d) {
    const analysis::Timeline& t = columns_.devices[d];
    const size_t n = t.width();
    const int lane = laneOf(d);
    const int bottom = l.lane(lane).bottom();
    struct Curve {
      const analysis::CurveColumns* c;
      QColor color;
      bool fill;
    };
    const Curve curves[] = {{&t.reserved, reservedColor(d), true},
                            {&t.active, activeColor(d), false},
                            {&t.allocated, allocatedColor(d), false}};
    for (const Curve& c : curves) {
      QPolygonF line;
      line.reserve(int(3 * n));
      for (size_t i = 0; i < n; ++i) {
        const double x = std::floor(l.tsToX(t.from_ts + i * t.column_ns));
        if (x < plot.left() - 1 || x > plot.right() + 1) continue;
        line << QPointF(x, l.valueToY(c.c->min[i], lane))
             << QPointF(x, l.valueToY(c.c->max[i], lane))
             << QPointF(x, l.valueToY(c.c->last[i], lane));
      }
      if (line.isEmpty()) continue;
      if (c.fill) {
        QPolygonF area = line;
        area << QPointF(line.back().x(), bottom) << QPointF(line.front().x(), bottom);
        QColor f = c.color;
        f.setAlpha(60);
        p.setPen(Qt::NoPen);
        p.setBrush(f);
        p.drawPolygon(area);
        p.setBrush(Qt::NoBrush);
      }
      p.setPen(QPen(c.color, 1));
      p.drawPolyline(line);
      if (c.fill) bands_.draw(p, l, lanes_, d, columns_.bands);  // over the area, under the lines
    }
  }
  // Step boundaries: thin solid lines in one call (a dotted pen, or a pattern brush, costs
  // tens of milliseconds for the ~500 lines of a zoomed-out long run).
  p.setPen(QColor(110, 110, 110));
  const QFontMetrics fm = p.fontMetrics();
  // Sorted by time: start at the view; at most one boundary per 3 px, found by binary search
  // (the ~80K steps of a long run would otherwise cost a visit each per frame). Each lane draws
  // its rank's steps (Note [Rank lanes]).
  auto by_ts = [](const std::pair<int64_t, uint64_t>& s, uint64_t ts) { return s.second < ts; };
  const double ns_per_px = double(view_to_ - view_from_) / std::max(1, plot.width());
  const uint64_t skip = uint64_t(3 * ns_per_px);
  std::vector<QLineF> lines;
  for (int lane = 0; lane < laneCount(); ++lane) {
    const QRect r = laneCount() > 1 ? l.lane(lane) : plot;
    const auto& steps = laneSteps(lane);  // read once when the trace opened
    double last_label = -1e9;
    auto it = std::lower_bound(steps.begin(), steps.end(), view_from_, by_ts);
    while (it != steps.end() && it->second <= view_to_) {
      const auto& [number, ts] = *it;
      const double x = l.tsToX(ts);
      lines.emplace_back(std::floor(x), r.top(), std::floor(x), r.bottom());
      if (x - last_label > fm.horizontalAdvance("0000") + 8) {
        p.drawText(QPointF(x + 2, r.bottom() - 3), QString::number(number));
        last_label = x;
      }
      it = std::lower_bound(it + 1, steps.end(), ts + skip, by_ts);
    }
  }
  p.setPen(QColor(205, 205, 205));
  p.drawLines(lines.data(), int(lines.size()));
  // An imported snapshot's steps are the importer's guesses: the plot says so.
  if (const QString note = inferredStepsNote(); !note.isEmpty() && !lines.empty()) {
    p.setPen(QColor(90, 90, 90));
    p.drawText(QRect(plot.left() + plot.width() / 3, plot.top() + 4, plot.width() * 2 / 3 - 8,
                     fm.height()),
               Qt::AlignRight | Qt::AlignVCenter,
               fm.elidedText(note, Qt::ElideMiddle, plot.width() * 2 / 3 - 8));
  }
}

QString TimelineWidget::inferredStepsNote() const {
  if (!data_ || data_->steps.empty() || data_->steps_inferred.empty()) return {};
  return tr("steps inferred from %1").arg(QString::fromStdString(data_->steps_inferred));
}

void TimelineWidget::drawMarkers(QPainter& p, const TimelineLayout& l) {
  const QRect plot = l.plot();
  markers_.clear();
  p.setRenderHint(QPainter::Antialiasing, true);
  for (size_t d = 0; d < data_->devices.size() && d < data_->peaks.size(); ++d) {
    const auto& peak = data_->peaks[d];
    if (!peak || peak->ts_ns < view_from_ || peak->ts_ns >= view_to_) continue;
    const int x = int(std::floor(l.tsToX(peak->ts_ns)));
    const int y = l.valueToY(peak->bytes, laneOf(d));
    markers_.push_back({data_->devices[d].name, peak->ts_ns, peak->bytes, QPoint(x, y)});
    // Above the point, so the curve's own pixel stays visible.
    QPolygonF tri;
    tri << QPointF(x, y - 3) << QPointF(x - 5, y - 11) << QPointF(x + 5, y - 11);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(214, 39, 40));
    p.drawPolygon(tri);
    p.setBrush(Qt::NoBrush);
    p.setPen(QColor(214, 39, 40));
    const QString label = tr("peak %1").arg(bytes_text(peak->bytes));
    const int w = p.fontMetrics().horizontalAdvance(label);
    const int lx = std::clamp(x + 7, plot.left() + 2, plot.right() - w - 2);
    p.drawText(QPoint(lx, std::max(l.lane(laneOf(d)).top() + 12, y - 4)), label);
  }
  p.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineWidget::drawSyncLane(QPainter& p, const TimelineLayout& l) {
  const QRect lane = l.syncLane();
  p.fillRect(lane, QColor(248, 248, 248));
  p.setPen(QColor(90, 90, 90));
  p.drawText(QRect(0, lane.top(), kLeftMargin - 6, lane.height()),
             Qt::AlignRight | Qt::AlignVCenter, tr("syncs"));
  const auto& s = data_->sync_events;
  auto by_ts = [](const SyncEvent& e, uint64_t ts) { return e.ts < ts; };
  const double ns_per_px = double(view_to_ - view_from_) / std::max(1, lane.width());
  const uint64_t skip = std::max<uint64_t>(1, uint64_t(ns_per_px));
  p.setPen(QColor(230, 110, 0));
  // One tick per pixel: after a tick, jump to the first sync a pixel later.
  std::vector<QLineF> ticks;
  for (auto it = std::lower_bound(s.begin(), s.end(), view_from_, by_ts);
       it != s.end() && it->ts < view_to_;
       it = std::lower_bound(it + 1, s.end(), it->ts + skip, by_ts)) {
    const double x = std::floor(l.tsToX(it->ts));
    ticks.emplace_back(x, lane.top() + 2, x, lane.bottom() - 2);
  }
  p.drawLines(ticks.data(), int(ticks.size()));
}

// A flame chart: one row per depth, each scope a box from its push to its pop (the end of
// the trace when never popped), named when wide enough; boxes narrower than a pixel that
// fall on a pixel already drawn in their row are skipped.
void TimelineWidget::drawScopeLane(QPainter& p, const TimelineLayout& l) {
  drawn_scopes_.clear();
  const int rows = l.scope_rows;
  if (rows == 0) return;
  const QRect lane = l.scopeLane();
  p.fillRect(lane, QColor(250, 250, 250));
  p.setPen(QColor(90, 90, 90));
  p.drawText(QRect(0, lane.top(), kLeftMargin - 6, kScopeRow), Qt::AlignRight | Qt::AlignVCenter,
             tr("scopes"));
  p.save();
  p.setClipRect(lane);
  const QFontMetrics fm = p.fontMetrics();
  std::vector<double> last_px(size_t(rows), -1e9);
  const auto& scopes = data_->scopes;
  for (size_t i = 0; i < scopes.size(); ++i) {
    const analysis::ScopeSpan& s = scopes[i];
    if (s.push_ts > view_to_) break;  // by push_ts
    const uint64_t end = s.pop_ts.value_or(data_->end_ns);
    if (end < view_from_ || s.depth >= rows || s.depth < 0) continue;
    const double x0 = std::max(l.tsToX(s.push_ts), double(lane.left()));
    const double x1 = std::min(l.tsToX(end), double(lane.right() + 1));
    double& last = last_px[size_t(s.depth)];
    if (x1 - x0 < 1 && std::floor(x0) <= last) continue;
    last = std::max(last, std::floor(x1));
    const QRectF r(x0, lane.top() + s.depth * kScopeRow, std::max(1.0, x1 - x0), kScopeRow - 1);
    const size_t h = std::hash<std::string>{}(s.name);
    p.fillRect(r, QColor::fromHsv(int(h % 360), 70, 235));
    if (r.width() > 24) {
      p.setPen(QColor(40, 40, 40));
      p.drawText(r.adjusted(2, 0, -1, 0), Qt::AlignLeft | Qt::AlignVCenter,
                 fm.elidedText(QString::fromStdString(s.name), Qt::ElideRight, int(r.width()) - 3));
    }
    drawn_scopes_.push_back({r, i});
  }
  p.restore();
}

QString TimelineWidget::scopeTooltip(const QPoint& pos) const {
  if (!data_) return {};
  // The box under the point; else one within a pixel of it (a box narrower than the cursor).
  auto under = [&](int slack) {
    return std::find_if(drawn_scopes_.rbegin(), drawn_scopes_.rend(), [&](const DrawnScope& d) {
      return d.rect.adjusted(-slack, 0, slack, 0).contains(pos);
    });
  };
  auto it = under(0);
  if (it == drawn_scopes_.rend()) it = under(1);
  if (it != drawn_scopes_.rend()) {
    const analysis::ScopeSpan& s = data_->scopes[it->index];
    const uint64_t end = s.pop_ts.value_or(data_->end_ns);
    return tr("<b>%1</b><br>from %2 for %3%4<br>thread %5")
        .arg(QString::fromStdString(s.path).toHtmlEscaped(),
             duration_text(s.push_ts - data_->origin_ns), duration_text(end - s.push_ts),
             s.pop_ts ? QString() : tr(" (never closed)"), QString::number(s.thread));
  }
  return {};
}

QString TimelineWidget::syncTooltip(const QPoint& pos) const {
  if (!data_ || !syncLaneRect().adjusted(0, -2, 0, 2).contains(pos)) return {};
  const uint64_t t0 = xToTs(pos.x() - 3), t1 = xToTs(pos.x() + 3);
  const auto& s = data_->sync_events;
  auto it = std::lower_bound(s.begin(), s.end(), t0,
                             [](const SyncEvent& e, uint64_t ts) { return e.ts < ts; });
  if (it == s.end() || it->ts > t1) return {};
  size_t n = 0;
  for (auto j = it; j != s.end() && j->ts <= t1; ++j) ++n;
  QString text =
      tr("<b>%1 sync</b> at %2, waited %3<br>%4")
          .arg(QString::fromStdString(it->kind), duration_text(it->ts - data_->origin_ns),
               duration_text(it->duration_ns), QString::fromStdString(it->site).toHtmlEscaped());
  const auto frames = data_->session->with(
      [&](const analysis::Trace& trace) { return trace.stack_frames(it->stack_id); });
  for (size_t i = 0; i < frames.size() && i < 8; ++i)
    text += "<br>&nbsp;&nbsp;" + QString::fromStdString(frames[i]).toHtmlEscaped();
  if (n > 1) text += tr("<br>(+%1 more within 3 px)").arg(n - 1);
  return text;
}

bool TimelineWidget::event(QEvent* e) {
  auto tip_at = [this](QPoint pos) {
    QString tip = scopeTooltip(pos);
    if (tip.isEmpty()) tip = syncTooltip(pos);
    if (tip.isEmpty()) tip = bands_.tooltip(pos, layout(), lanes_, columns_.bands);
    return tip;
  };
  return answer_tooltip(this, e, tip_at) || QWidget::event(e);
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  if (!data_) return;
  const double steps = e->angleDelta().y() / 120.0;
  zoomAround(xToTs(e->position().x()), std::pow(0.8, steps));
  e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  press_pos_ = e->position().toPoint();
  press_from_ = view_from_;
  press_to_ = view_to_;
  selecting_ = e->modifiers() & Qt::ShiftModifier;
  dragging_ = !selecting_;
  if (selecting_) range_ = {xToTs(press_pos_.x()), xToTs(press_pos_.x())};
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  if (selecting_) {
    range_->second = xToTs(pos.x());
    update();
  } else if (dragging_) {
    const double ns_per_px = double(press_to_ - press_from_) / plotRect().width();
    const double from = double(press_from_) - (pos.x() - press_pos_.x()) * ns_per_px;
    setView(uint64_t(std::max(0.0, from)),
            uint64_t(std::max(0.0, from)) + (press_to_ - press_from_));
  }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  const bool click = (e->position().toPoint() - press_pos_).manhattanLength() < 4;
  if (click && plotRect().contains(press_pos_)) {
    if (selecting_) range_.reset();
    setSelectedTime(xToTs(press_pos_.x()));
  } else if (selecting_ && range_) {
    auto [a, b] = std::minmax(range_->first, range_->second);
    emit rangeSelected(a, b);
  }
  dragging_ = selecting_ = false;
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const uint64_t mid = view_from_ + (view_to_ - view_from_) / 2;
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoomAround(mid, 0.5);
      break;
    case Qt::Key_Minus:
      zoomAround(mid, 2.0);
      break;
    case Qt::Key_Left:
      panByFraction(-0.2);
      break;
    case Qt::Key_Right:
      panByFraction(0.2);
      break;
    case Qt::Key_0:
      range_.reset();
      resetView();
      break;
    case Qt::Key_Z:
    case Qt::Key_Return:
      if (range_) {
        auto [a, b] = std::minmax(range_->first, range_->second);
        range_.reset();
        setView(a, b);
      }
      break;
    default:
      QWidget::keyPressEvent(e);
  }
}

}  // namespace tidemark::gui
