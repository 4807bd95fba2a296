// ComparePage: the Compare tab, and the workflow behind it. compareWith() opens another trace
// in the thread pool and publishes it (ViewSelection::setCompared: the timeline overlays its
// curves), then lists the differences (analysis::diff, this trace as A) and publishes the
// differential flame graphs of the peaks (ViewSelection::setFlameDiffs: the flame page offers
// them). A tab once first used.
#pragma once

#include <QLabel>

#include "gui/pages/pages.h"

namespace tidemark::gui {

class ComparePage : public Page {
  Q_OBJECT
 public:
  ComparePage(ViewSelection* selection, QueryModePtr mode);
  void compareWith(const QString& path);
  DiffModel* model() const { return model_; }

 signals:
  void failed(const QString& message);  // it could not be opened

 private:
  struct Compared {
    TraceDataPtr data;
    std::vector<DiffRow> rows;
    QString error;
    std::vector<FlameDiff> flames;
  };
  void showOpened(Compared c);
  void differ();  // the differences with other_, and its flame graphs
  void showDifferences(Compared c);

  QLabel* label_;
  DiffModel* model_;
  TraceDataPtr other_;
  AsyncQuery<Compared> open_, diff_;
};

}  // namespace tidemark::gui
