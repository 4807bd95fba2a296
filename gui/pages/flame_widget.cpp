#include "gui/pages/flame_widget.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>
#include <cstdint>

#include "gui/models/table_models.h"
#include "gui/pages/tooltip.h"

namespace tidemark::gui {

namespace {

bool is_prefix(const FlameWidget::Path& a, const FlameWidget::Path& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// A warm colour per function (flamegraph.pl's palette), the same in every run: the hash is
// FNV-1a of the name without its location, so one function's frames look alike.
QColor frame_color(const std::string& frame) {
  const size_t cut = frame.rfind(" (");
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < (cut == std::string::npos ? frame.size() : cut); ++i)
    h = (h ^ static_cast<unsigned char>(frame[i])) * 16777619u;
  return QColor::fromHsv(static_cast<int>(h % 55), 120 + static_cast<int>((h >> 8) % 90),
                         225 + static_cast<int>((h >> 16) % 30));
}

const QColor kCallerColor(200, 208, 220);  // "all" and the callers of the zoomed frame
// Library frames: a fold of them, and the frames of a fold expanded (Note [Folded library
// frames]), so both read as the library's, not the user's.
const QColor kFoldColor(168, 184, 214);
const QColor kUnfoldedColor(212, 221, 238);

// A frame of a differential graph: red as it grew (by the share of its bytes that is new),
// blue as it shrank (by the share of its base that went), near white when unchanged.
// `before` and `after`: this trace's bytes and the compared one's.
QColor diff_color(int64_t before, int64_t after) {
  const int64_t delta = after - before;
  if (delta == 0) return QColor(235, 235, 235);
  const double share = static_cast<double>(delta > 0 ? delta : -delta) /
                       static_cast<double>(std::max<int64_t>(delta > 0 ? after : before, 1));
  const int fade = 235 - static_cast<int>(std::min(share, 1.0) * 170);
  return delta > 0 ? QColor(235, fade, fade) : QColor(fade, fade, 235);
}

// This trace's and the compared one's bytes of a differential frame (FlameWidget::setTree).
std::pair<int64_t, int64_t> before_after(const analysis::FlameNode& n, bool negated) {
  return negated ? std::pair{n.bytes, n.base_bytes} : std::pair{n.base_bytes, n.bytes};
}

}  // namespace

FlameWidget::FlameWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::ClickFocus);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
}

QColor FlameWidget::nodeColor(const analysis::FlameNode& n) const {
  if (n.base_bytes < 0)
    return !n.folded.empty() ? kFoldColor : n.unfolded > 0 ? kUnfoldedColor : frame_color(n.frame);
  auto [before, after] = before_after(n, negated_);
  return diff_color(before, after);
}

void FlameWidget::setTree(analysis::FlameNode root, QString what, bool negated) {
  root_ = std::move(root);
  what_ = std::move(what);
  negated_ = negated;
  zoom_.clear();
  relayout();
  emit zoomChanged();
}

const analysis::FlameNode* FlameWidget::node(const Path& p) const {
  const analysis::FlameNode* n = &root_;
  for (size_t i : p) {
    if (i >= n->children.size()) return nullptr;
    n = &n->children[i];
  }
  return n;
}

analysis::FlameNode* FlameWidget::mutableNode(const Path& p) {
  return const_cast<analysis::FlameNode*>(node(p));
}

bool FlameWidget::toggleFold(const Path& p) {
  analysis::FlameNode* n = mutableNode(p);
  if (!n) return false;
  const Path before = zoom_;
  const bool below = zoom_.size() > p.size() && is_prefix(p, zoom_);
  if (!n->folded.empty()) {
    // The fold's children now hang under its frames: a path below it passes them all.
    const size_t levels = n->folded.size() - 1;
    *n = analysis::unfold(*n);
    if (below) zoom_.insert(zoom_.begin() + static_cast<long>(p.size()), levels, 0);
  } else if (n->unfolded > 0) {
    // The run's outermost frame: up while the caller is the run's frame before this one.
    Path q = p;
    while (!q.empty()) {
      const Path up(q.begin(), q.end() - 1);
      if (node(up)->unfolded != node(q)->unfolded + 1) break;
      q = up;
    }
    analysis::FlameNode* outermost = mutableNode(q);
    const size_t levels = outermost->unfolded - 1;
    *outermost = analysis::refold(*outermost);
    if (zoom_.size() > q.size() && is_prefix(q, zoom_)) {
      if (zoom_.size() - q.size() <= levels)  // zoomed on one of the run's frames: the fold
        zoom_.resize(q.size());
      else
        zoom_.erase(zoom_.begin() + static_cast<long>(q.size()),
                    zoom_.begin() + static_cast<long>(q.size() + levels));
    }
  } else {
    return false;
  }
  relayout();
  if (zoom_ != before) emit zoomChanged();
  emit foldToggled();
  return true;
}

void FlameWidget::zoomTo(Path p) {
  while (!node(p)) p.pop_back();
  if (p == zoom_) return;
  zoom_ = std::move(p);
  relayout();
  emit zoomChanged();
}

int FlameWidget::rows() const {
  return static_cast<int>(zoom_.size() + 1 + node(zoom_)->depth());
}

void FlameWidget::relayout() {
  setMinimumHeight(rows() * kRowHeight);
  updateGeometry();
  update();
}

QSize FlameWidget::sizeHint() const {
  return {640, rows() * kRowHeight};
}

QRectF FlameWidget::rectOf(const Path& p) const {
  const double w = width();
  const double y = static_cast<double>(p.size()) * kRowHeight;
  if (!node(p)) return {};
  if (is_prefix(p, zoom_)) return {0, y, w, kRowHeight};
  if (!is_prefix(zoom_, p)) return {};
  const analysis::FlameNode* n = node(zoom_);
  if (n->bytes <= 0) return {};
  const double scale = w / static_cast<double>(n->bytes);
  double x = 0;
  for (size_t k = zoom_.size(); k < p.size(); ++k) {
    for (size_t s = 0; s < p[k]; ++s) x += static_cast<double>(n->children[s].bytes) * scale;
    n = &n->children[p[k]];
  }
  const double width_px = static_cast<double>(n->bytes) * scale;
  if (width_px < 1.0) return {};  // not drawn (paintEvent), so not hit either
  return {x, y, width_px, kRowHeight};
}

std::optional<FlameWidget::Path> FlameWidget::pathAt(const QPointF& pos) const {
  if (pos.x() < 0 || pos.x() >= width() || pos.y() < 0) return std::nullopt;
  const size_t row = static_cast<size_t>(pos.y() / kRowHeight);
  if (row <= zoom_.size()) return Path(zoom_.begin(), zoom_.begin() + static_cast<long>(row));
  const analysis::FlameNode* n = node(zoom_);
  if (n->bytes <= 0) return std::nullopt;
  const double scale = width() / static_cast<double>(n->bytes);
  Path p = zoom_;
  double x = 0;
  while (p.size() < row) {
    bool found = false;
    for (size_t i = 0; i < n->children.size(); ++i) {
      const double w = static_cast<double>(n->children[i].bytes) * scale;
      if (pos.x() < x + w) {
        if (w < 1.0) return std::nullopt;  // not drawn
        p.push_back(i);
        n = &n->children[i];
        found = true;
        break;
      }
      x += w;
    }
    if (!found) return std::nullopt;  // right of the children: the parent's own bytes
  }
  return p;
}

QString FlameWidget::labelFor(const Path& p) const {
  const analysis::FlameNode* n = node(p);
  if (!n) return {};
  if (p.empty()) return tr("all: %1 %2").arg(bytes_text(n->bytes), what_);
  return QString::fromStdString(n->frame);
}

QString FlameWidget::tooltipFor(const Path& p) const {
  const analysis::FlameNode* n = node(p);
  if (!n) return {};
  const double share =
      root_.bytes > 0 ? 100.0 * static_cast<double>(n->bytes) / static_cast<double>(root_.bytes)
                      : 0;
  QString text =
      tr("%1\n%2 (%3% of all) in %4 %5")
          .arg(labelFor(p), bytes_text(n->bytes), QString::number(share, 'f', 1),
               QString::number(n->count), n->count == 1 ? tr("allocation") : tr("allocations"));
  if (n->base_bytes >= 0) {
    auto [before, after] = before_after(*n, negated_);
    text += tr("\nthis trace %1, the compared one %2: %3%4")
                .arg(bytes_text(before), bytes_text(after), after > before ? "+" : "",
                     bytes_text(after - before));
  }
  if (!n->locations.empty()) {
    QStringList at;
    for (size_t i = 0; i < n->locations.size() && i < 4; ++i)
      at << tr("%1 (%2)").arg(QString::fromStdString(n->locations[i].first),
                              bytes_text(n->locations[i].second));
    if (n->locations.size() > 4) at << tr("%1 more").arg(n->locations.size() - 4);
    text += tr("\nat %1").arg(at.join(", "));
  }
  if (n->self_bytes > 0 && !n->children.empty())
    text += tr("\n%1 allocated by this frame itself").arg(bytes_text(n->self_bytes));
  if (p.size() == 1 && n->frame.rfind("(stacks cut at ", 0) == 0)
    text +=
        tr("\nThese stacks were deeper than the recording kept, so their callers are "
           "unknown: record with --stacks 64 (or more) to see them");
  if (!n->folded.empty()) {
    text += tr("\nLibrary frames, outermost first:");
    constexpr size_t kListed = 8;
    for (size_t i = 0; i < n->folded.size() && i < kListed; ++i)
      text += "\n  " + QString::fromStdString(n->folded[i].frame);
    if (n->folded.size() > kListed) text += tr("\n  … %1 more").arg(n->folded.size() - kListed);
    return text + tr("\nClick to expand them");
  }
  if (n->unfolded > 0)
    return text + tr("\nA library frame of an expanded fold: click to fold it again");
  if (p.size() > zoom_.size())
    text += tr("\nClick to zoom in");
  else if (p != zoom_)
    text += tr("\nClick to zoom out to here");
  return text;
}

void FlameWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().base());
  const QFontMetrics fm = painter.fontMetrics();
  auto draw = [&](const Path& p, const QRectF& r, const QColor& fill) {
    painter.fillRect(r.adjusted(0, 0, -1, -1), fill);
    if (r.width() < 24) return;
    const double luma = 0.299 * fill.red() + 0.587 * fill.green() + 0.114 * fill.blue();
    painter.setPen(luma < 140 ? Qt::white : Qt::black);  // readable on dark blue
    const QRectF text = r.adjusted(3, 0, -4, -1);
    painter.drawText(text, Qt::AlignVCenter | Qt::AlignLeft,
                     fm.elidedText(labelFor(p), Qt::ElideRight, static_cast<int>(text.width())));
  };
  for (size_t d = 0; d <= zoom_.size(); ++d) {
    Path p(zoom_.begin(), zoom_.begin() + static_cast<long>(d));
    draw(p, rectOf(p), d == zoom_.size() && d > 0 ? nodeColor(*node(p)) : kCallerColor);
  }
  // The zoomed frame's callees, level by level; frames under a pixel wide are left out (and
  // so is everything below them).
  const analysis::FlameNode* z = node(zoom_);
  if (z->bytes <= 0) return;
  const double scale = width() / static_cast<double>(z->bytes);
  struct Item {
    const analysis::FlameNode* n;
    Path p;
    double x;
  };
  std::vector<Item> todo{{z, zoom_, 0}};
  while (!todo.empty()) {
    Item it = std::move(todo.back());
    todo.pop_back();
    double x = it.x;
    for (size_t i = 0; i < it.n->children.size(); ++i) {
      const analysis::FlameNode& c = it.n->children[i];
      const double w = static_cast<double>(c.bytes) * scale;
      if (w >= 1.0) {
        Path p = it.p;
        p.push_back(i);
        const QRectF r(x, static_cast<double>(p.size()) * kRowHeight, w, kRowHeight);
        draw(p, r, nodeColor(c));
        todo.push_back({&c, std::move(p), x});
      }
      x += w;
    }
  }
}

void FlameWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  if (auto p = pathAt(e->position()); p && !toggleFold(*p)) zoomTo(*p);
}

void FlameWidget::keyPressEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Escape && !zoom_.empty()) {
    Path up = zoom_;
    up.pop_back();
    zoomTo(up);
    return;
  }
  QWidget::keyPressEvent(e);
}

bool FlameWidget::event(QEvent* e) {
  auto tip_at = [this](QPoint pos) {
    const auto p = pathAt(pos);
    return p ? tooltipFor(*p) : QString();
  };
  return answer_tooltip(this, e, tip_at) || QWidget::event(e);
}

FlamePage::FlamePage(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Flame graph of:")));
  choice_ = new QComboBox;
  bar->addWidget(choice_);
  hint_ = new QLabel(tr("computing…"));
  hint_->setWordWrap(true);  // a narrow page (beside the source view) wraps it, not widens
  hint_->setMinimumWidth(120);
  bar->addWidget(hint_, 1);
  layout->addLayout(bar);
  flame_ = new FlameWidget;
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setWidget(flame_);
  layout->addWidget(scroll, 1);
  connect(choice_, &QComboBox::currentIndexChanged, this, &FlamePage::showChoice);
}

void FlamePage::setData(const TraceDataPtr& data) {
  const bool same = data_ && same_trace(data_.get(), data.get());
  const bool had = same && data_->stage != Stage::opened && !data_->live;
  data_ = data;
  if (!same) {
    selected_.reset();
    compared_.clear();
    shown_.reset();
  }
  // A later stage of the same trace: the same graphs, zoom kept (a reload under another rule
  // for sites says so with a first snapshot at Stage::opened that still holds them).
  if (had) return;
  if (!data_ || data_->stage == Stage::opened || data_->live) {  // no graphs yet
    if (!same) {
      choices_.clear();
      choice_->clear();
      flame_->setTree({}, {});
    }
    hint_->setText(data_ && data_->live
                       ? tr("The flame graphs come once the recording is finalized.")
                       : tr("computing…"));
    return;
  }
  // The graphs of the same trace again (TraceLoader::reload): the graph shown stays chosen,
  // with its new tree.
  rebuilt_graph_ = same && shown_;
  rebuildChoices(same ? shown_ : std::nullopt);
}

void FlamePage::setSelectedTime(size_t device, uint64_t time_ns, analysis::FlameNode tree) {
  if (!data_ || device >= data_->devices.size()) return;
  selected_ = Selected{device, time_ns, std::move(tree)};
  rebuilt_graph_ = shown_ && shown_->second == Graph::selected;  // a new time: a new graph
  rebuildChoices(std::pair{device, Graph::selected});
}

void FlamePage::setCompared(std::vector<Compared> flames) {
  if (!data_) return;
  std::optional<std::pair<size_t, Graph>> shown;
  if (const int i = choice_->currentIndex(); i >= 0 && static_cast<size_t>(i) < choices_.size())
    shown = choices_[static_cast<size_t>(i)];
  compared_.clear();
  rebuilt_graph_ = shown_ && (shown_->second == Graph::grown || shown_->second == Graph::shrunk);
  for (Compared& c : flames)
    for (size_t i = 0; i < data_->devices.size(); ++i)
      if (data_->devices[i].name == c.device) compared_.emplace_back(i, std::move(c));
  rebuildChoices(shown);
}

// The choices: per device the peak (largest first), the leaks, the compared trace's, then the
// selected time.
void FlamePage::rebuildChoices(std::optional<std::pair<size_t, Graph>> show) {
  choices_.clear();
  std::vector<std::pair<int64_t, std::pair<size_t, Graph>>> found;
  const bool tables = data_ && data_->stage != Stage::opened && !data_->live;
  for (size_t i = 0; tables && i < data_->devices.size(); ++i) {
    if (i < data_->flame_peak.size() && data_->flame_peak[i].bytes > 0)
      found.push_back({data_->flame_peak[i].bytes, {i, Graph::peak}});
    // Reserved after the allocated graphs, unless the device has none (an injected program).
    if (i < data_->flame_reserved.size() && data_->flame_reserved[i].bytes > 0) {
      const bool only = i >= data_->flame_peak.size() || data_->flame_peak[i].bytes == 0;
      found.push_back({only ? data_->flame_reserved[i].bytes : -1 - static_cast<int64_t>(i),
                       {i, Graph::reserved}});
    }
    if (i < data_->flame_leaks.size() && data_->flame_leaks[i].bytes > 0)
      found.push_back({-1000 - static_cast<int64_t>(i), {i, Graph::leaks}});  // after the peaks
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [device, c] : compared_) {
    if (c.grown.bytes > 0) found.push_back({0, {device, Graph::grown}});
    if (c.shrunk.bytes > 0) found.push_back({0, {device, Graph::shrunk}});
  }
  if (selected_) found.push_back({0, {selected_->device, Graph::selected}});
  choice_->blockSignals(true);
  choice_->clear();
  for (const auto& [key, c] : found) {
    const auto& [device, graph] = c;
    choice_->addItem(tr("%1: %2 (%3)")
                         .arg(QString::fromStdString(data_->devices[device].name), graphName(c),
                              bytes_text(tree(c).bytes)));
    choices_.push_back(c);
  }
  choice_->blockSignals(false);
  hint_->setText(choices_.empty()
                     ? tr("No allocations to draw.")
                     : tr("Click a frame to zoom in; click a caller above it, or press Escape, "
                          "to zoom out. Click a grey-blue box of library frames to expand it, "
                          "and one of its frames to fold them again."));
  int index = choices_.empty() ? -1 : 0;
  for (size_t i = 0; show && i < choices_.size(); ++i)
    if (choices_[i] == *show) index = static_cast<int>(i);
  showChoice(index);
}

QString FlamePage::graphName(const std::pair<size_t, Graph>& c) const {
  switch (c.second) {
    case Graph::peak:
      return tr("live at the allocated peak");
    case Graph::reserved:
      return tr("reserved at the reserved peak (segments)");
    case Graph::leaks:
      return data_ && data_->imported ? tr("live at the end of the snapshot")
                                      : tr("leaked at the end");
    case Graph::grown:
      return tr("the compared trace's peak, coloured by its change from this one's (red: grew)");
    case Graph::shrunk:
      return tr("this trace's peak, coloured by its change in the compared one (blue: shrank)");
    case Graph::selected:
      break;
  }
  return tr("live at %1 (the selected time)")
      .arg(QString::fromStdString(data_ ? data_->time_text(selected_ ? selected_->time_ns : 0)
                                        : std::string()));
}

const analysis::FlameNode& FlamePage::tree(const std::pair<size_t, Graph>& c) const {
  switch (c.second) {
    case Graph::peak:
      return data_->flame_peak[c.first];
    case Graph::reserved:
      return data_->flame_reserved[c.first];
    case Graph::leaks:
      return data_->flame_leaks[c.first];
    case Graph::grown:
    case Graph::shrunk:
      for (const auto& [device, graphs] : compared_)
        if (device == c.first) return c.second == Graph::grown ? graphs.grown : graphs.shrunk;
      break;
    case Graph::selected:
      break;
  }
  return selected_->tree;
}

void FlamePage::showChoice(int index) {
  if (index < 0 || static_cast<size_t>(index) >= choices_.size()) {
    flame_->setTree({}, {});
    shown_.reset();
    return;
  }
  if (choice_->currentIndex() != index) {
    const QSignalBlocker block(choice_);
    choice_->setCurrentIndex(index);
  }
  const auto& c = choices_[static_cast<size_t>(index)];
  // The list was rebuilt around the graph already shown (a Compare, a time selected while
  // another graph is shown): keep it, and its zoom.
  if (shown_ == c && !rebuilt_graph_) return;
  shown_ = c;
  rebuilt_graph_ = false;
  flame_->setTree(
      tree(c),
      tr("%1 on %2").arg(graphName(c), QString::fromStdString(data_->devices[c.first].name)),
      c.second == Graph::shrunk);
}

}  // namespace tidemark::gui
