#include "gui/pages/allocator_widget.h"

#include <QMouseEvent>
#include <QPainter>
#include <algorithm>

#include "gui/models/table_models.h"
#include "gui/pages/tooltip.h"

namespace tidemark::gui {

namespace {
constexpr int kHeader = 44;       // px: title and legend
constexpr int kRowHeight = 18;    // px per segment
constexpr int kLabelWidth = 150;  // px: segment size and pool
constexpr double kMinBar = 0.04;  // the shortest bar, as a fraction of the longest
}  // namespace

AllocatorWidget::AllocatorWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
}

void AllocatorWidget::setState(AllocatorState state) {
  state_ = std::move(state);
  max_segment_ = 1;
  for (const SegmentState& s : state_.segments) max_segment_ = std::max(max_segment_, s.size);
  updateGeometry();
  update();
}

QSize AllocatorWidget::sizeHint() const {
  return QSize(800, kHeader + kRowHeight * int(std::max<size_t>(1, state_.segments.size())) + 8);
}

QRectF AllocatorWidget::segmentRect(size_t i) const {
  const double full = std::max(50, width() - kLabelWidth - 12);
  const double f = std::max(kMinBar, double(state_.segments[i].size) / double(max_segment_));
  return QRectF(kLabelWidth, kHeader + double(i) * kRowHeight, full * f, kRowHeight - 4);
}

void AllocatorWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  uint64_t reserved = 0, allocated = 0, pending = 0;
  for (const SegmentState& s : state_.segments) {
    reserved += s.size;
    for (const BlockState& b : s.blocks) (b.pending_free ? pending : allocated) += b.size;
  }
  p.setPen(Qt::black);
  p.drawText(
      8, 16,
      tr("%1 at %2: %3 segments, reserved %4, allocated %5, pending free %6, cached %7")
          .arg(QString::fromStdString(state_.device))
          .arg(duration_text(state_.time_ns))
          .arg(state_.segments.size())
          .arg(bytes_text(int64_t(reserved)), bytes_text(int64_t(allocated)),
               bytes_text(int64_t(pending)), bytes_text(int64_t(reserved - allocated - pending))));
  int x = 8;
  const std::pair<QString, QColor> legend[] = {{tr("allocated"), allocatedColor()},
                                               {tr("pending free"), pendingColor()},
                                               {tr("cached free"), cachedColor()}};
  for (const auto& [label, color] : legend) {
    p.fillRect(x, 24, 10, 10, color);
    p.drawText(x + 14, 33, label);
    x += 30 + p.fontMetrics().horizontalAdvance(label);
  }
  if (state_.segments.empty()) {
    p.drawText(rect().adjusted(0, kHeader, 0, 0), Qt::AlignHCenter | Qt::AlignTop,
               tr("No segments reserved at this time (click the timeline to pick one)"));
    return;
  }
  for (size_t i = 0; i < state_.segments.size(); ++i) {
    const SegmentState& s = state_.segments[i];
    const QRectF r = segmentRect(i);
    p.setPen(Qt::black);
    p.drawText(QRectF(4, r.top(), kLabelWidth - 8, r.height()), Qt::AlignRight | Qt::AlignVCenter,
               bytes_text(int64_t(s.size)) + " " + QString::fromStdString(s.pool));
    p.fillRect(r, cachedColor());
    for (const BlockState& b : s.blocks) {
      const double x0 = r.left() + r.width() * double(b.addr - s.addr) / double(s.size);
      const double w = std::max(1.0, r.width() * double(b.size) / double(s.size));
      p.fillRect(QRectF(x0, r.top(), w, r.height()),
                 b.pending_free ? pendingColor() : allocatedColor());
      if (w >= 3) {  // block boundaries
        p.setPen(Qt::white);
        p.drawLine(QPointF(x0 + w, r.top()), QPointF(x0 + w, r.bottom()));
      }
    }
    p.setPen(QColor(120, 120, 120));
    p.drawRect(r);
  }
}

const BlockState* AllocatorWidget::blockAt(const QPointF& pos) const {
  for (size_t i = 0; i < state_.segments.size(); ++i) {
    const QRectF r = segmentRect(i);
    if (!r.contains(pos)) continue;
    const SegmentState& s = state_.segments[i];
    const uint64_t addr = s.addr + uint64_t((pos.x() - r.left()) / r.width() * double(s.size));
    for (const BlockState& b : s.blocks)
      if (addr >= b.addr && addr < b.addr + b.size) return &b;
  }
  return nullptr;
}

QPointF AllocatorWidget::blockCenter(size_t seg, size_t b) const {
  const QRectF r = segmentRect(seg);
  const SegmentState& s = state_.segments[seg];
  const BlockState& blk = s.blocks[b];
  const double mid = double(blk.addr - s.addr) + double(blk.size) / 2;
  return {r.left() + mid / double(s.size) * r.width(), r.center().y()};
}

void AllocatorWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  if (const BlockState* b = blockAt(e->position()))
    emit blockClicked(state_.device_id, b->addr, b->alloc_ts);
}

QString AllocatorWidget::tooltipAt(const QPointF& pos) const {
  for (size_t i = 0; i < state_.segments.size(); ++i) {
    const QRectF r = segmentRect(i);
    if (!r.contains(pos)) continue;
    const SegmentState& s = state_.segments[i];
    const uint64_t addr = s.addr + uint64_t((pos.x() - r.left()) / r.width() * double(s.size));
    for (const BlockState& b : s.blocks) {
      if (addr < b.addr || addr >= b.addr + b.size) continue;
      return tr("<b>%1 block</b> %2 (requested %3)<br>at 0x%4<br>%5<br>category %6%7")
          .arg(b.pending_free ? tr("pending-free") : tr("allocated"), bytes_text(int64_t(b.size)),
               bytes_text(int64_t(b.requested)), QString::number(b.addr, 16),
               QString::fromStdString(b.site).toHtmlEscaped(), QString::fromStdString(b.category),
               b.scope.empty() ? QString()
                               : "<br>scope " + QString::fromStdString(b.scope).toHtmlEscaped());
    }
    // A gap: the cached free range around addr.
    uint64_t lo = s.addr, hi = s.addr + s.size;
    for (const BlockState& b : s.blocks) {
      if (b.addr + b.size <= addr) lo = std::max(lo, b.addr + b.size);
      if (b.addr > addr) hi = std::min(hi, b.addr);
    }
    return tr("<b>cached free</b> %1<br>segment 0x%2, %3 (%4 pool)")
        .arg(bytes_text(int64_t(hi - lo)), QString::number(s.addr, 16), bytes_text(int64_t(s.size)),
             QString::fromStdString(s.pool));
  }
  return {};
}

bool AllocatorWidget::event(QEvent* e) {
  return answer_tooltip(this, e, [this](QPoint pos) { return tooltipAt(pos); }) ||
         QWidget::event(e);
}

}  // namespace tidemark::gui
