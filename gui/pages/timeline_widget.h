// TimelineWidget: allocated, active and reserved bytes per device over time, drawn with
// QPainter from analysis::timeline() at the plot's pixel width (one level-of-detail column
// per pixel, see docs/gui.md), with the peak marked, step boundaries, the scopes (module
// paths, NVTX ranges) as a flame chart under the curves (one row per depth), and a lane of syncs.
// A merged trace of several ranks (`tidemark merge`) is drawn in lanes, one per rank, on one
// time axis and one byte scale (Note [Rank lanes]).
// Zoom (wheel, +/-), pan (drag, arrows), select a range (shift+drag), pick a time (click),
// reset (0). A zoom requeries the visible range in the thread pool (AsyncQuery: the latest
// view wins); until the answer comes the previous columns are drawn at their own times, so
// nothing jumps. Its parts are their own classes: the geometry (TimelineLayout), the rank lanes
// (RankLanes), the stacked bands (TimelineBands) and the Compare overlay (TimelineCompare); this
// holds the view, the queries, the input, and paints them in order.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "gui/models/async_query.h"
#include "gui/models/trace_loader.h"
#include "gui/pages/timeline_bands.h"
#include "gui/pages/timeline_compare.h"
#include "gui/pages/timeline_lanes.h"
#include "gui/pages/timeline_layout.h"
#include "profiler/analysis/bands.h"

namespace tidemark::gui {

class TimelineWidget : public QWidget {
  Q_OBJECT
 public:
  // What fills the allocated area: one colour, or bands by category or by top site
  // (analysis::allocated_bands, built once per trace in the thread pool).
  using Stacking = TimelineBands::Stacking;
  using BandSet = TimelineBands::BandSet;

  // `mode`: shared with the view's pages (a TraceView's); none: one of its own.
  explicit TimelineWidget(QueryModePtr mode = nullptr, QWidget* parent = nullptr);
  ~TimelineWidget() override;

  void setTraceData(TraceDataPtr data);
  // Query synchronously from now on (screenshots, tests) instead of in the thread pool.
  void setSynchronous(bool sync) { mode_->synchronous = sync; }

  uint64_t viewFrom() const { return view_from_; }
  uint64_t viewTo() const { return view_to_; }
  void setView(uint64_t from, uint64_t to);
  void resetView();
  void zoomAround(uint64_t ts, double factor);  // factor < 1 zooms in
  void panByFraction(double f);
  void setHighlight(uint64_t from, uint64_t to);
  void setSelectedTime(uint64_t ts);
  void setStacking(Stacking s);
  // Compare: a second trace's allocated and reserved curves overlaid, dashed, its time shifted
  // so both start together, or so their first steps coincide (docs/gui.md, "Compare").
  using Align = TimelineCompare::Align;
  void setCompare(TraceDataPtr other, Align align = Align::start);
  void setCompareAlign(Align align);
  TraceDataPtr compareData() const { return compare_.other(); }
  Align compareAlign() const { return compare_.alignment(); }
  // What to add to a time of this trace to get the time of the other shown at the same x.
  int64_t compareOffset() const { return compare_.offset(); }
  // The other trace's columns of the last query, per device of this trace (a device the other
  // trace lacks has width 0).
  const std::vector<analysis::Timeline>& compareColumns() const { return columns_.compare; }
  static QColor compareColor(size_t device) { return TimelineCompare::color(device); }
  Stacking stacking() const { return bands_.stacking(); }
  // The bands drawn by the last paint's columns, per device (empty: not stacked, or the bands
  // are still being built).
  const std::vector<analysis::BandColumns>& bandColumns() const { return columns_.bands; }
  std::shared_ptr<const BandSet> bands() const { return bands_.current(); }
  // The band legend of a lane: each band of its devices, label and colour.
  std::vector<std::pair<std::string, QColor>> legendEntries(int lane) const {
    return bands_.legendEntries(lanes_, lane);
  }
  static QColor bandColor(Stacking s, size_t slot, const std::string& label) {
    return TimelineBands::color(s, slot, label);
  }
  // The colour a device's band is drawn in (a label has one colour in every lane).
  QColor bandColorOf(size_t device, size_t band) const { return bands_.colorOf(device, band); }
  // What the plot says was inferred rather than recorded (an imported PyTorch snapshot): the
  // band legend's title (TimelineBands), and the note beside the step lines; empty when what
  // they show was recorded.
  QString inferredCategoriesNote() const { return bands_.inferredCategoriesNote(); }
  QString categoriesNote() const { return bands_.categoriesNote(); }
  QString inferredStepsNote() const;
  std::optional<uint64_t> selectedTime() const { return selected_; }

  // Geometry, for tests and tools: the layout of the widget as it is now.
  TimelineLayout layout() const;
  QRect plotRect() const { return layout().plot(); }
  // Note [Rank lanes]: 1 lane but for a merged trace of several ranks; the lane of a device
  // (an index into TraceData::devices) and the part of plotRect() a lane takes.
  int laneCount() const { return lanes_.count(); }
  int laneOf(size_t device) const { return lanes_.of(device); }
  QRect laneRect(int lane) const { return layout().lane(lane); }
  QString laneLabel(int lane) const { return lanes_.label(lane); }
  QRect syncLaneRect() const { return layout().syncLane(); }
  QRect scopeLaneRect() const { return layout().scopeLane(); }  // empty height without scopes
  int scopeRows() const;
  int valueToY(int64_t bytes, int lane = 0) const { return layout().valueToY(bytes, lane); }
  double tsToX(uint64_t ts) const { return layout().tsToX(ts); }
  uint64_t xToTs(double x) const { return layout().xToTs(x); }
  int64_t yMaxBytes() const { return y_max_; }
  struct PeakMarker {
    std::string device;
    uint64_t ts = 0;
    int64_t bytes = 0;
    QPoint pos;
  };
  // Markers drawn by the last paint.
  const std::vector<PeakMarker>& peakMarkers() const { return markers_; }
  // The steps whose lines a lane draws: its rank's in a merged trace (Note [Steps of a rank]),
  // else the trace's.
  const std::vector<std::pair<int64_t, uint64_t>>& laneSteps(int lane) const;
  struct DrawnScope {
    QRectF rect;
    size_t index = 0;  // into TraceData::scopes
  };
  // Scopes drawn by the last paint (spans narrower than a pixel are merged into one).
  const std::vector<DrawnScope>& drawnScopes() const { return drawn_scopes_; }
  QString scopeTooltip(const QPoint& pos) const;
  double lastPaintMs() const { return last_paint_ms_; }
  bool hasColumns() const { return !columns_.devices.empty(); }
  double lastQueryMs() const { return last_query_ms_; }
  static QColor allocatedColor(size_t device);
  static QColor activeColor(size_t device);
  static QColor reservedColor(size_t device);

 signals:
  void timeSelected(quint64 ts);
  void curvesPainted();  // after a paint that drew the curves
  void rangeSelected(quint64 from, quint64 to);
  void bandsReady();  // the bands of the current stacking were built
  void extended();    // a followed trace grew and the view extended to its new end
  void viewChanged(quint64 from, quint64 to);  // the visible range (a zoom or a pan)

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  bool event(QEvent*) override;

 private:
  struct Columns {
    std::vector<analysis::Timeline> devices;
    std::vector<analysis::BandColumns> bands;  // per device when stacked
    std::vector<analysis::Timeline> compare;   // per device when comparing
    double ms = 0;
  };
  struct Query {  // what one query needs, copied into the thread pool
    TraceDataPtr data, other;
    // The rows read by earlier queries (one query at a time uses them: AsyncQuery's rule).
    std::shared_ptr<analysis::TimelineCache> cache, other_cache;
    std::shared_ptr<const BandSet> bands;
    int64_t offset = 0;
    uint64_t from = 0, to = 0;
    size_t width = 0;
  };
  void requery();
  static Columns query(const Query& q);
  // The end of the view's range: this trace's end, or the compared one's if later.
  uint64_t endTs() const { return compare_.end(data_.get()); }
  void applyColumns(Columns c);
  void drawAxes(QPainter& p, const TimelineLayout& l);
  void drawCurves(QPainter& p, const TimelineLayout& l);
  void drawMarkers(QPainter& p, const TimelineLayout& l);
  void drawSyncLane(QPainter& p, const TimelineLayout& l);
  void drawScopeLane(QPainter& p, const TimelineLayout& l);
  QString syncTooltip(const QPoint& pos) const;

  TraceDataPtr data_;
  RankLanes lanes_;
  uint64_t view_from_ = 0, view_to_ = 1;
  Columns columns_;
  int64_t y_max_ = 1;
  std::shared_ptr<analysis::TimelineCache> cache_;
  TimelineCompare compare_;
  std::optional<uint64_t> selected_;
  std::optional<std::pair<uint64_t, uint64_t>> highlight_, range_;
  // Mouse drag state.
  QPoint press_pos_;
  uint64_t press_from_ = 0, press_to_ = 0;
  bool dragging_ = false, selecting_ = false;
  std::vector<PeakMarker> markers_;
  std::vector<DrawnScope> drawn_scopes_;
  double last_paint_ms_ = 0, last_query_ms_ = 0;
  QueryModePtr mode_;  // of both queries
  // Last: they go first, before what their answers would touch.
  TimelineBands bands_;
  AsyncQuery<Columns> columns_query_;
};

}  // namespace tidemark::gui
