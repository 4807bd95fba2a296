// TraceView: one open trace (one tab of the main window). While the loader works it shows
// progress; a failure shows the loader's message; then the timeline above and, below it,
// the summary, the tables and the allocator state at the selected time.
#pragma once

#include <QWidget>

#include "gui/core/table_models.h"
#include "gui/core/trace_loader.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QScrollArea;
class QStackedWidget;
class QTabWidget;
class QTextBrowser;
class QSortFilterProxyModel;
class QTableView;
class QAbstractItemModel;

namespace tidemark::gui {

class TimelineWidget;
class AllocatorWidget;

class TraceView : public QWidget {
  Q_OBJECT
 public:
  enum class View { timeline, summary, live, leaks, syncs, steps, allocator };

  explicit TraceView(QWidget* parent = nullptr);
  // Loads `path` in the background.
  void load(const QString& path);
  // Shows already loaded data (screenshots, tests).
  void setTraceData(TraceDataPtr data);
  void showView(View v);

  TraceDataPtr traceData() const { return data_; }
  TimelineWidget* timeline() const { return timeline_; }
  AllocatorWidget* allocator() const { return allocator_; }
  SiteModel* liveModel() const { return live_model_; }
  QString errorText() const;

 signals:
  void loaded();
  void failed(const QString& message);

 public slots:
  void selectTime(quint64 ts);

 private:
  QWidget* makeTable(QAbstractItemModel* model, int sort_column);
  void showAllocator();

  TraceLoader loader_;
  TraceDataPtr data_;
  QStackedWidget* stack_;
  QLabel* progress_label_;
  QProgressBar* progress_;
  QLabel* error_;
  TimelineWidget* timeline_;
  QTabWidget* tabs_;
  QTextBrowser* summary_;
  SiteModel* live_model_;
  SiteModel* leak_model_;
  SyncSiteModel* sync_model_;
  StepModel* step_model_ = nullptr;
  QWidget* step_page_;
  QComboBox* device_;
  AllocatorWidget* allocator_;
  QScrollArea* allocator_scroll_;
  uint64_t allocator_ts_ = 0;
};

}  // namespace tidemark::gui
