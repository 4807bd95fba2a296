// ComparePage: the Compare tab, and the workflow behind it. compareWith() opens another trace
// in the thread pool (opened(): the timeline overlays its curves, the flame page gets nothing
// yet), then lists the differences (analysis::diff, this trace as A) with the differential
// flame graphs of the peaks (differences()). A tab once first used.
#pragma once

#include <QLabel>

#include "gui/core/pages.h"

namespace tidemark::gui {

class ComparePage : public Page {
  Q_OBJECT
 public:
  ComparePage(ViewSelection* selection, QueryModePtr mode);
  void compareWith(const QString& path);
  DiffModel* model() const { return model_; }

 signals:
  void opened(const tidemark::gui::TraceDataPtr& other);  // its curves can be overlaid
  void failed(const QString& message);                     // it could not be opened
  // Per device of both traces (by name): the differential flame graphs of the peaks.
  void differences(const std::vector<tidemark::gui::FlamePage::Compared>& flames);

 private:
  struct Compared {
    TraceDataPtr data;
    std::vector<DiffRow> rows;
    QString error;
    std::vector<FlamePage::Compared> flames;
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
