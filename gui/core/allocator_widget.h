// AllocatorWidget: the caching allocator's segments at one time, each a horizontal bar (its
// length proportional to its size) with its blocks coloured: allocated, pending free (freed
// by the caller, still in use by another stream) and cached free (the gaps). Hovering a
// block shows its sizes, site, category and scope.
#pragma once

#include <QWidget>

#include "gui/core/trace_data.h"

namespace tidemark::gui {

class AllocatorWidget : public QWidget {
  Q_OBJECT
 public:
  explicit AllocatorWidget(QWidget* parent = nullptr);
  void setState(AllocatorState state);
  const AllocatorState& state() const { return state_; }
  QSize sizeHint() const override;

  static QColor allocatedColor() { return QColor(31, 119, 180); }
  static QColor pendingColor() { return QColor(255, 160, 40); }
  static QColor cachedColor() { return QColor(215, 225, 235); }

 protected:
  void paintEvent(QPaintEvent*) override;
  bool event(QEvent*) override;

 private:
  QRectF segmentRect(size_t i) const;
  QString tooltipAt(const QPointF& pos) const;
  AllocatorState state_;
  uint64_t max_segment_ = 1;
};

}  // namespace tidemark::gui
