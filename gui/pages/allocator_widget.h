// AllocatorWidget: the caching allocator's segments at one time, each a horizontal bar (its
// length proportional to its size) with its blocks coloured: allocated, pending free (freed
// by the caller, still in use by another stream) and cached free (the gaps). Hovering a
// block shows its sizes, site, category and scope; clicking one emits blockClicked (Details).
#pragma once

#include <QWidget>

#include "gui/models/trace_data.h"

namespace tidemark::gui {

class AllocatorWidget : public QWidget {
  Q_OBJECT
 public:
  explicit AllocatorWidget(QWidget* parent = nullptr);
  void setState(AllocatorState state);
  const AllocatorState& state() const { return state_; }
  QSize sizeHint() const override;
  // The block drawn at `pos`, if any; and where block `b` of segment `seg` is drawn.
  const BlockState* blockAt(const QPointF& pos) const;
  QPointF blockCenter(size_t seg, size_t b) const;

  static QColor allocatedColor() { return QColor(31, 119, 180); }
  static QColor pendingColor() { return QColor(255, 160, 40); }
  static QColor cachedColor() { return QColor(215, 225, 235); }

 signals:
  void blockClicked(qint64 device, quint64 addr, quint64 alloc_ts);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  QRectF segmentRect(size_t i) const;
  QString tooltipAt(const QPointF& pos) const;
  AllocatorState state_;
  uint64_t max_segment_ = 1;
};

}  // namespace tidemark::gui
