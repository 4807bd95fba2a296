// TraceView: one open trace (one tab of the main window). Until the trace opens it shows
// progress; a failure shows the loader's message; then the timeline above (as soon as the
// trace opens) and, below it, the summary, the tables, the allocator state at the selected
// time and the details of a selected allocation, each filled as the loader's stages arrive
// ("computing…" until then).
#pragma once

#include <QFutureWatcher>
#include <QWidget>
#include <optional>

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
  enum class View { timeline, summary, live, leaks, syncs, steps, allocator, details };

  explicit TraceView(QWidget* parent = nullptr);
  ~TraceView() override;
  // Loads `path` in the background.
  void load(const QString& path);
  // Shows already loaded data (screenshots, tests), or the next stage of the same trace.
  void setTraceData(TraceDataPtr data);
  // Query on the calling thread from now on (screenshots, tests, benchmarks).
  void setSynchronous(bool sync);
  void showView(View v);

  TraceDataPtr traceData() const { return data_; }
  TimelineWidget* timeline() const { return timeline_; }
  AllocatorWidget* allocator() const { return allocator_; }
  SiteModel* liveModel() const { return live_model_; }
  QString errorText() const;
  QString detailsHtml() const;
  const std::optional<analysis::AllocationDetails>& details() const { return details_; }
  QString tabTitle(View v) const;

 signals:
  void opened();       // the timeline can paint
  void tablesShown();  // summary and tables filled
  void loaded();       // everything, the findings included
  void failed(const QString& message);

 public slots:
  void selectTime(quint64 ts);
  // Shows the Details of the allocation at `addr` on `device` allocated at `alloc_ts`.
  void showDetails(qint64 device, quint64 addr, quint64 alloc_ts);

 private:
  QWidget* makeTable(QAbstractItemModel* model, int sort_column);
  void showAllocator();
  void updateTabTitles();

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
  QFutureWatcher<AllocatorState> allocator_watcher_;
  bool allocator_pending_ = false;
  bool allocator_started_ = false;
  bool synchronous_ = false;
  QTextBrowser* details_view_;
  std::optional<analysis::AllocationDetails> details_;
};

}  // namespace tidemark::gui
