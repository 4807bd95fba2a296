// TimelineBands (timeline_bands.h): the stacked bands of a timeline, built in the thread pool
// and drawn from the columns each query of the curves takes.
#include "gui/pages/timeline_bands.h"

#include <QFileInfo>
#include <QImage>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "gui/models/table_models.h"

namespace tidemark::gui {

TimelineBands::TimelineBands(QueryModePtr mode, std::function<void(Stacking)> built)
    : built_(std::move(built)), query_(std::move(mode), [this](std::pair<Stacking, BandSet> b) {
        std::vector<std::vector<std::string>> labels;
        for (const auto& bands : b.second) labels.push_back(bands->labels());
        slots_[int(b.first)] = band_slots(labels);
        sets_[int(b.first)] = std::make_shared<const BandSet>(std::move(b.second));
        if (b.first == stacking_) built_(b.first);
      }) {}

void TimelineBands::setTrace(TraceDataPtr data) {
  if (!same_trace(data_.get(), data.get())) {
    query_.cancel();  // of the trace shown before
    for (auto& s : sets_) s.reset();
  }
  data_ = std::move(data);
}

void TimelineBands::refolded() {
  query_.cancel();  // one still building may be the site bands of the rule before
  sets_[int(Stacking::site)].reset();
}

bool TimelineBands::setStacking(Stacking s) {
  stacking_ = s;
  if (!data_ || s == Stacking::none || sets_[int(s)]) return true;
  // Latest wins: bands of a stacking chosen before and still building are dropped.
  query_.request([data = data_, s](const auto&) { return std::pair{s, build(*data, s)}; });
  return false;
}

// On a connection of its own, so the zoom queries never wait for it.
TimelineBands::BandSet TimelineBands::build(const TraceData& data, Stacking s) {
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

std::vector<std::vector<size_t>> band_slots(const std::vector<std::vector<std::string>>& labels) {
  std::map<std::string, size_t> slot_of;
  std::vector<std::vector<size_t>> out;
  for (const std::vector<std::string>& device : labels) {
    std::vector<size_t>& of_device = out.emplace_back();
    for (const std::string& label : device)
      of_device.push_back(slot_of.try_emplace(label, slot_of.size()).first->second);
  }
  return out;
}

QColor TimelineBands::colorOf(size_t device, size_t band) const {
  const auto set = current();
  if (!set || device >= set->size() || band >= (*set)[device]->size()) return {};
  // A set and its slots arrive together (the query's callback).
  return color(stacking_, slots_[int(stacking_)][device][band], (*set)[device]->labels()[band]);
}

QColor TimelineBands::color(Stacking s, size_t slot, const std::string& label) {
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
  return kSites[slot % std::size(kSites)];
}

// The bands stacked from the bottom: in each pixel column a band fills from the sum of those
// below it to that plus its own bytes. The columns are written straight into an image of the
// plot, drawn at once: a raster fill of a jagged polygon per band, or one fillRect per band
// and column, costs tens to hundreds of milliseconds on a wide plot; this costs one pass over
// the plot's pixels. The colours are pre-mixed with white (opaque, lighter than the legend's).
void TimelineBands::draw(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes,
                         size_t device, const std::vector<analysis::BandColumns>& columns) const {
  const auto set = current();
  if (device >= columns.size() || !set || device >= set->size()) return;
  const analysis::BandColumns& bc = columns[device];
  const analysis::Bands& bands = *(*set)[device];
  const QRect plot = layout.plot();
  const int lane = lanes.of(device);  // Note [Rank lanes]
  QImage img(plot.size(), QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::transparent);
  std::vector<QRgb> colors;
  for (size_t b = 0; b < bands.size(); ++b) {
    const QColor c = colorOf(device, b);
    colors.push_back(
        qRgb((c.red() * 3 + 255) / 4, (c.green() * 3 + 255) / 4, (c.blue() * 3 + 255) / 4));
  }
  const size_t n = bc.width();
  const int w = img.width(), h = img.height();
  for (size_t i = 0; i < n; ++i) {
    const int x0 =
        std::max(0, int(std::floor(layout.tsToX(bc.from_ts + i * bc.column_ns))) - plot.left());
    const int x1 = std::min(
        w, std::max(x0 + 1, int(std::floor(layout.tsToX(bc.from_ts + (i + 1) * bc.column_ns))) -
                                plot.left()));
    int64_t below = 0;
    for (size_t b = 0; b < bc.values.size() && b < colors.size(); ++b) {
      const int64_t v = bc.values[b][i];
      const int y0 = std::clamp(layout.valueToY(below + v, lane) - plot.top(), 0, h);
      const int y1 = std::clamp(layout.valueToY(below, lane) - plot.top(), 0, h);
      below += v;
      for (int y = y0; y < y1; ++y) {
        QRgb* line = reinterpret_cast<QRgb*>(img.scanLine(y));
        std::fill(line + x0, line + std::max(x0, x1), colors[b]);
      }
    }
  }
  p.drawImage(plot.topLeft(), img);
}

QString TimelineBands::inferredCategoriesNote() const {
  if (!data_ || stacking_ != Stacking::category || data_->category_rules ||
      data_->categories_inferred.empty())
    return {};
  return QObject::tr("categories inferred, not recorded");
}

QString TimelineBands::categoriesNote() const {
  if (data_ && stacking_ == Stacking::category && data_->category_rules)
    return QObject::tr("categories: rules of %1")
        .arg(QFileInfo(QString::fromStdString(data_->category_rules->source())).fileName());
  return inferredCategoriesNote();
}

std::vector<std::pair<std::string, QColor>> TimelineBands::legendEntries(const RankLanes& lanes,
                                                                         int lane) const {
  std::vector<std::pair<std::string, QColor>> out;
  const auto set = current();
  if (!set) return out;
  for (size_t d = 0; d < set->size(); ++d) {
    if (lanes.of(d) != lane) continue;
    const analysis::Bands& bands = *(*set)[d];
    for (size_t b = 0; b < bands.size(); ++b) {
      std::pair<std::string, QColor> e{bands.labels()[b], colorOf(d, b)};
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(std::move(e));
    }
  }
  return out;
}

// One box at the top left of each lane (Note [Rank lanes]), the lane's bands in it.
void TimelineBands::drawLegend(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes,
                               const std::vector<analysis::BandColumns>& columns) const {
  const auto set = current();
  if (columns.empty() || !set || set->empty()) return;
  const QFontMetrics fm = p.fontMetrics();
  const int row = fm.height() + 2;
  QFont italic = p.font();
  italic.setItalic(true);
  for (int lane = 0; lane < lanes.count(); ++lane) {
    const std::vector<std::pair<std::string, QColor>> entries = legendEntries(lanes, lane);
    if (entries.empty()) continue;
    // Custom categories name their rules file first; an imported snapshot's categories are the
    // importer's guesses, and the legend says so (once, in the first lane's box).
    const QString title = lane == 0 ? categoriesNote() : QString();
    const int title_rows = title.isEmpty() ? 0 : 1;
    // The title starts where the swatches do, the labels 14 px right of it.
    int w = title.isEmpty() ? 0 : QFontMetrics(italic).horizontalAdvance(title) - 12;
    for (const auto& [label, c] : entries)
      w = std::max(w, fm.horizontalAdvance(
                          fm.elidedText(QString::fromStdString(label), Qt::ElideMiddle, 260)));
    const QRect r = layout.lane(lane);
    const QRect box(r.left() + 6, r.top() + 6, w + 24, row * int(entries.size() + title_rows) + 6);
    p.fillRect(box, QColor(255, 255, 255, 215));
    if (title_rows) {
      p.save();
      p.setFont(italic);
      p.setPen(QColor(60, 60, 60));
      p.drawText(box.left() + 4, box.top() + 3 + fm.ascent() + 1, title);
      p.restore();
    }
    for (size_t b = 0; b < entries.size(); ++b) {
      const int y = box.top() + 3 + row * int(b + title_rows);
      p.fillRect(box.left() + 4, y + 2, 10, row - 4, entries[b].second);
      p.setPen(Qt::black);
      p.drawText(box.left() + 18, y + fm.ascent() + 1,
                 fm.elidedText(QString::fromStdString(entries[b].first), Qt::ElideMiddle, 260));
    }
  }
}

// The band under the cursor in a stacked timeline: its name and bytes in that column.
QString TimelineBands::tooltip(const QPoint& pos, const TimelineLayout& layout,
                               const RankLanes& lanes,
                               const std::vector<analysis::BandColumns>& columns) const {
  const auto set = current();
  if (!data_ || !set || columns.empty() || !layout.plot().contains(pos)) return {};
  // The first device of the lane under the cursor (Note [Rank lanes]).
  size_t device = 0;
  for (size_t d = 0; d < columns.size(); ++d)
    if (layout.lane(lanes.of(d)).contains(pos)) {
      device = d;
      break;
    }
  if (device >= set->size()) return {};
  const int lane = lanes.of(device);
  const analysis::BandColumns& bc = columns[device];
  const analysis::Bands& bands = *(*set)[device];
  const uint64_t ts = layout.xToTs(pos.x());
  if (ts < bc.from_ts || bc.width() == 0) return {};
  const size_t col = std::min<size_t>(bc.width() - 1, (ts - bc.from_ts) / bc.column_ns);
  int64_t below = 0;
  for (size_t b = 0; b < bc.values.size(); ++b) {
    const int64_t v = bc.values[b][col];
    if (v > 0 && pos.y() <= layout.valueToY(below, lane) &&
        pos.y() >= layout.valueToY(below + v, lane)) {
      QString tip =
          QObject::tr("<b>%1</b>: %2 at %3")
              .arg(QString::fromStdString(bands.labels()[b]).toHtmlEscaped(), bytes_text(v),
                   QString::fromStdString(data_->time_text(ts - data_->origin_ns)));
      if (!inferredCategoriesNote().isEmpty())
        tip += QObject::tr("<br><i>inferred, not recorded: from %1</i>")
                   .arg(QString::fromStdString(data_->categories_inferred).toHtmlEscaped());
      return tip;
    }
    below += v;
  }
  return {};
}

}  // namespace tidemark::gui
