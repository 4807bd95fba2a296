// FlameWidget: a flame graph of allocations (analysis::FlameNode), drawn as an icicle: "all"
// at the top, each frame below its caller, widths proportional to bytes, so the widest
// towers are where the memory comes from. Hovering a frame shows its bytes, its share and its
// allocations; clicking one zooms in on it (it fills the width, its callers stay above it as
// full-width bars); clicking a caller, or Escape, zooms back out. A fold of library frames
// (Note [Folded library frames]: "… 12 library frames (c10::foo …)", drawn grey-blue) expands
// into its frames on a click instead, and a click on one of those frames folds them again.
//
// FlamePage: the Flame graph tab, the widget in a scroll area under a choice of graph: per
// device, the stacks live at the allocated peak, those of the segments reserved at the
// reserved peak, those leaked (still allocated at the end), and
// the stacks live at the time last selected on the timeline, and with Compare the differential
// graph of the compared trace's peak against this one's.
#pragma once

#include <QWidget>
#include <optional>
#include <utility>
#include <vector>

#include "gui/models/trace_loader.h"

class QComboBox;
class QLabel;

namespace tidemark::gui {

class FlameWidget : public QWidget {
  Q_OBJECT
 public:
  using Path = std::vector<size_t>;  // child indices from the root; {} is the root
  static constexpr int kRowHeight = 20;

  explicit FlameWidget(QWidget* parent = nullptr);
  // `what` names the graph in the root's label ("live at the allocated peak on cpu"). A
  // differential tree (base_bytes >= 0) has the compared trace's bytes as widths and this
  // trace's as base, or with `negated` this trace's as widths and the compared one's as base;
  // either way red is what grew from this trace to the compared one, blue what shrank.
  void setTree(analysis::FlameNode root, QString what, bool negated = false);
  const analysis::FlameNode& tree() const { return root_; }
  const analysis::FlameNode* node(const Path& p) const;  // null when `p` leads nowhere
  const Path& zoomed() const { return zoom_; }
  void zoomTo(Path p);  // the longest prefix of `p` that leads to a node
  // Expands the fold at `p` into its frames, or folds again the expanded run that the frame at
  // `p` belongs to (what a click on either does); false, and nothing changes, for any other
  // node. The zoom follows: a path through the run gains or loses its frames' levels, and a
  // zoom inside a run folded again is on the fold.
  bool toggleFold(const Path& p);
  std::optional<Path> pathAt(const QPointF& pos) const;
  QRectF rectOf(const Path& p) const;  // where the node is drawn; empty when it is not
  QString tooltipFor(const Path& p) const;
  QString labelFor(const Path& p) const;
  QSize sizeHint() const override;

 signals:
  void zoomChanged();
  void foldToggled();  // a fold was expanded, or a run folded again

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  bool event(QEvent*) override;

 private:
  int rows() const;
  void relayout();
  QColor nodeColor(const analysis::FlameNode& n) const;
  analysis::FlameNode* mutableNode(const Path& p);
  analysis::FlameNode root_;
  QString what_;
  bool negated_ = false;
  Path zoom_;
};

class FlamePage : public QWidget {
  Q_OBJECT
 public:
  explicit FlamePage(QWidget* parent = nullptr);
  // Offers the graphs of `data` (from its tables stage on; before that, says they are coming).
  void setData(const TraceDataPtr& data);
  // Offers, and shows, the graph of what was live at a time selected on the timeline (on
  // device `device` of the data, `time_ns` after the origin), replacing an earlier one.
  void setSelectedTime(size_t device, uint64_t time_ns, analysis::FlameNode tree);
  // Offers the differential graphs of Compare (FlameDiff, trace_data.h), replacing earlier
  // ones; what shrank is drawn negated.
  using Compared = FlameDiff;
  void setCompared(std::vector<Compared> flames);
  FlameWidget* flame() const { return flame_; }
  QComboBox* choice() const { return choice_; }

 private:
  enum class Graph { peak, reserved, leaks, grown, shrunk, selected };
  void showChoice(int index);
  // Rebuilds the combo box and shows `show` (the first graph when it is not offered).
  void rebuildChoices(std::optional<std::pair<size_t, Graph>> show);
  QString graphName(const std::pair<size_t, Graph>& c) const;
  const analysis::FlameNode& tree(const std::pair<size_t, Graph>& c) const;

  TraceDataPtr data_;
  QComboBox* choice_;
  QLabel* hint_;
  FlameWidget* flame_;
  std::vector<std::pair<size_t, Graph>> choices_;  // (device index, graph)
  struct Selected {
    size_t device = 0;
    uint64_t time_ns = 0;
    analysis::FlameNode tree;
  };
  std::optional<Selected> selected_;
  std::vector<std::pair<size_t, Compared>> compared_;  // (device index, graphs)
  std::optional<std::pair<size_t, Graph>> shown_;      // the graph the widget holds
  bool rebuilt_graph_ = false;  // shown_'s graph was replaced: show it again, unzoomed
};

}  // namespace tidemark::gui
