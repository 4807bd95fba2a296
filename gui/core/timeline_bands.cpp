// TimelineWidget's stacked bands (timeline_widget.h): built once per stacking in the thread
// pool from analysis::allocated_bands, queried with the curves, drawn between the reserved
// area and the curves' lines, with a legend and a tooltip naming the band under the cursor.
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "gui/core/table_models.h"
#include "gui/core/timeline_widget.h"

namespace tidemark::gui {

// On a connection of its own, so the zoom queries never wait for it (one pass over the
// allocations: seconds on 10M events).
TimelineWidget::BandSet TimelineWidget::buildBands(const TraceData& data, Stacking s) {
  BandSet set;
  if (s == Stacking::none) return set;
  try {
    // The sites of the site bands (Note [Frames in the GUI]), the categories' rules.
    analysis::Trace trace = open_own_trace(data);
    for (const analysis::DeviceRef& d : data.devices)
      set.push_back(std::make_shared<const analysis::Bands>(analysis::allocated_bands(
          trace, d.id,
          s == Stacking::category ? analysis::BandBy::category : analysis::BandBy::site)));
  } catch (const std::exception&) {
    set.clear();  // drawn unstacked; the loader reports what is wrong with the file
  }
  return set;
}

void TimelineWidget::setStacking(Stacking s) {
  stacking_ = s;
  if (!data_ || s == Stacking::none || bands_[int(s)]) {
    requery();
    update();
    if (data_ && s != Stacking::none) emit bandsReady();
    return;
  }
  // Latest wins: bands of a stacking chosen before and still building are dropped.
  bands_query_.request([data = data_, s](const auto&) {
    return std::pair{s, buildBands(*data, s)};
  });
  if (!bands_[int(s)]) requery();  // unstacked until the bands arrive
}

QColor TimelineWidget::bandColor(Stacking s, size_t band, const std::string& label) {
  if (s == Stacking::category) {
    static const std::pair<const char*, QColor> kColors[] = {
        {"parameter", QColor(140, 86, 75)},
        {"gradient", QColor(255, 127, 14)},
        {"optimizer_state", QColor(148, 103, 189)},
        {"activation", QColor(23, 190, 207)},
        {"input", QColor(188, 189, 34)},
        {"temporary", QColor(227, 119, 194)},
        {"comm_buffer", QColor(44, 160, 44)}};  // DistributedDataParallel's gradient buckets
    for (const auto& [name, color] : kColors)
      if (label == name) return color;
    if (label == "unknown") return QColor(170, 170, 170);
    // A custom category (Note [Category rules]): the site palette, in the rules' order.
  }
  if (label == "other sites") return QColor(170, 170, 170);
  static const QColor kSites[] = {{31, 119, 180},  {255, 127, 14},  {44, 160, 44},
                                  {214, 39, 40},   {148, 103, 189}, {140, 86, 75},
                                  {227, 119, 194}, {188, 189, 34},  {23, 190, 207}};
  return kSites[band % std::size(kSites)];
}

// The bands stacked from the bottom: in each pixel column a band fills from the sum of those
// below it to that plus its own bytes. The columns are written straight into an image of the
// plot, drawn at once: a raster fill of a jagged polygon per band, or one fillRect per band
// and column, costs tens to hundreds of milliseconds on a wide plot; this costs one pass over
// the plot's pixels. The colours are pre-mixed with white (opaque, lighter than the legend's).
void TimelineWidget::drawBands(QPainter& p, size_t device) {
  const auto set = bands_[int(stacking_)];
  if (device >= columns_.bands.size() || !set || device >= set->size()) return;
  const analysis::BandColumns& bc = columns_.bands[device];
  const analysis::Bands& bands = *(*set)[device];
  const QRect plot = plotRect();
  const int lane = laneOf(device);  // Note [Rank lanes]
  QImage img(plot.size(), QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::transparent);
  std::vector<QRgb> colors;
  for (size_t b = 0; b < bands.size(); ++b) {
    const QColor c = bandColor(stacking_, b, bands.labels()[b]);
    colors.push_back(
        qRgb((c.red() * 3 + 255) / 4, (c.green() * 3 + 255) / 4, (c.blue() * 3 + 255) / 4));
  }
  const size_t n = bc.width();
  const int w = img.width(), h = img.height();
  for (size_t i = 0; i < n; ++i) {
    const int x0 = std::max(0, int(std::floor(tsToX(bc.from_ts + i * bc.column_ns))) - plot.left());
    const int x1 =
        std::min(w, std::max(x0 + 1, int(std::floor(tsToX(bc.from_ts + (i + 1) * bc.column_ns))) -
                                         plot.left()));
    int64_t below = 0;
    for (size_t b = 0; b < bc.values.size() && b < colors.size(); ++b) {
      const int64_t v = bc.values[b][i];
      const int y0 = std::clamp(valueToY(below + v, lane) - plot.top(), 0, h);
      const int y1 = std::clamp(valueToY(below, lane) - plot.top(), 0, h);
      below += v;
      for (int y = y0; y < y1; ++y) {
        QRgb* line = reinterpret_cast<QRgb*>(img.scanLine(y));
        std::fill(line + x0, line + std::max(x0, x1), colors[b]);
      }
    }
  }
  p.drawImage(plot.topLeft(), img);
}

QString TimelineWidget::inferredCategoriesNote() const {
  if (!data_ || stacking_ != Stacking::category || data_->category_rules ||
      data_->categories_inferred.empty())
    return {};
  return tr("categories inferred, not recorded");
}

QString TimelineWidget::categoriesNote() const {
  if (data_ && stacking_ == Stacking::category && data_->category_rules)
    return tr("categories: rules of %1")
        .arg(QFileInfo(QString::fromStdString(data_->category_rules->source())).fileName());
  return inferredCategoriesNote();
}

void TimelineWidget::drawBandLegend(QPainter& p, const QRect& plot) {
  const auto set = bands_[int(stacking_)];
  if (columns_.bands.empty() || !set || set->empty()) return;
  const analysis::Bands& bands = *set->front();  // the first device's bands name the colours
  const QFontMetrics fm = p.fontMetrics();
  const int row = fm.height() + 2;
  // Custom categories name their rules file first; an imported snapshot's categories are the
  // importer's guesses, and the legend says so.
  const QString title = categoriesNote();
  const int title_rows = title.isEmpty() ? 0 : 1;
  QFont italic = p.font();
  italic.setItalic(true);
  // The title starts where the swatches do, the labels 14 px right of it.
  int w = title.isEmpty() ? 0 : QFontMetrics(italic).horizontalAdvance(title) - 12;
  for (const std::string& l : bands.labels())
    w = std::max(
        w, fm.horizontalAdvance(fm.elidedText(QString::fromStdString(l), Qt::ElideMiddle, 260)));
  const QRect box(plot.left() + 6, plot.top() + 6, w + 24,
                  row * int(bands.size() + title_rows) + 6);
  p.fillRect(box, QColor(255, 255, 255, 215));
  if (title_rows) {
    p.save();
    p.setFont(italic);
    p.setPen(QColor(60, 60, 60));
    p.drawText(box.left() + 4, box.top() + 3 + fm.ascent() + 1, title);
    p.restore();
  }
  for (size_t b = 0; b < bands.size(); ++b) {
    const int y = box.top() + 3 + row * int(b + title_rows);
    p.fillRect(box.left() + 4, y + 2, 10, row - 4, bandColor(stacking_, b, bands.labels()[b]));
    p.setPen(Qt::black);
    p.drawText(box.left() + 18, y + fm.ascent() + 1,
               fm.elidedText(QString::fromStdString(bands.labels()[b]), Qt::ElideMiddle, 260));
  }
}

// The band under the cursor in a stacked timeline: its name and bytes in that column.
QString TimelineWidget::bandTooltip(const QPoint& pos) const {
  const auto set = bands_[int(stacking_)];
  if (!data_ || !set || columns_.bands.empty() || !plotRect().contains(pos)) return {};
  // The first device of the lane under the cursor (Note [Rank lanes]).
  size_t device = 0;
  for (size_t d = 0; d < columns_.bands.size(); ++d)
    if (laneRect(laneOf(d)).contains(pos)) {
      device = d;
      break;
    }
  if (device >= set->size()) return {};
  const int lane = laneOf(device);
  const analysis::BandColumns& bc = columns_.bands[device];
  const analysis::Bands& bands = *(*set)[device];
  const uint64_t ts = xToTs(pos.x());
  if (ts < bc.from_ts || bc.width() == 0) return {};
  const size_t col = std::min<size_t>(bc.width() - 1, (ts - bc.from_ts) / bc.column_ns);
  int64_t below = 0;
  for (size_t b = 0; b < bc.values.size(); ++b) {
    const int64_t v = bc.values[b][col];
    if (v > 0 && pos.y() <= valueToY(below, lane) && pos.y() >= valueToY(below + v, lane)) {
      QString tip =
          tr("<b>%1</b>: %2 at %3")
              .arg(QString::fromStdString(bands.labels()[b]).toHtmlEscaped(), bytes_text(v),
                   QString::fromStdString(data_->time_text(ts - data_->origin_ns)));
      if (!inferredCategoriesNote().isEmpty())
        tip += tr("<br><i>inferred, not recorded: from %1</i>")
                   .arg(QString::fromStdString(data_->categories_inferred).toHtmlEscaped());
      return tip;
    }
    below += v;
  }
  return {};
}

}  // namespace tidemark::gui
