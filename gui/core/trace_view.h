// TraceView: one open trace (one tab of the main window). Until the trace opens it shows
// progress; a failure shows the loader's message; then the timeline above (as soon as the
// trace opens) and, below it, the summary, the tables, the flame graphs, the allocator state
// at the selected time and the details of a selected allocation, each filled as the loader's
// stages arrive ("computing…" until then). The fixed tabs are in View's order.
#pragma once

#include <QFutureWatcher>
#include <QWidget>
#include <optional>

#include "gui/core/table_models.h"
#include "gui/core/timeline_widget.h"
#include "gui/core/flame_widget.h"
#include "gui/core/trace_loader.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QScrollArea;
class QStackedWidget;
class QTabWidget;
class QTextBrowser;
class QTimer;
class QSortFilterProxyModel;
class QTableView;
class QAbstractItemModel;

namespace tidemark::gui {

class AllocatorWidget;

class TraceView : public QWidget {
  Q_OBJECT
 public:
  enum class View {
    timeline,
    summary,
    live,
    leaks,
    flame,
    syncs,
    steps,
    allocator,
    tensors,
    details,
    compare,
    selection
  };

  explicit TraceView(QWidget* parent = nullptr);
  ~TraceView() override;
  // Loads `path` in the background.
  void load(const QString& path);
  // Shows already loaded data (screenshots, tests), or the next stage of the same trace.
  void setTraceData(TraceDataPtr data);
  // Query on the calling thread from now on (screenshots, tests, benchmarks).
  void setSynchronous(bool sync);
  // Shows the view at `size` without putting it on a screen (screenshots, tests, benchmarks);
  // with `data`, queries synchronously from now on and shows `data`.
  void showOffscreen(QSize size, TraceDataPtr data = nullptr);
  void showView(View v);
  void setStacking(TimelineWidget::Stacking s);

  TraceDataPtr traceData() const { return data_; }
  TimelineWidget* timeline() const { return timeline_; }
  AllocatorWidget* allocator() const { return allocator_; }
  FlamePage* flamePage() const { return flame_page_; }
  SiteModel* liveModel() const { return live_model_; }
  TensorModel* tensorModel() const { return tensor_model_; }
  DiffModel* diffModel() const { return diff_model_; }
  SiteModel* selectionModel() const { return selection_model_; }
  QString errorText() const;
  QString detailsHtml() const;
  const std::optional<analysis::AllocationDetails>& details() const { return details_; }
  const std::optional<analysis::TensorDetails>& tensorDetails() const { return tensor_details_; }
  QString tabTitle(View v) const;
  // Export (analysis/export.h, docs/export.md): writes this view's trace to `out` in the
  // thread pool, through a temporary file of its own renamed into place (analysis::OutputFile,
  // Note [Output files]), so a failed export leaves `out` as it was; then emits exported() with
  // a line for the status bar. Not while following, nor onto the trace itself.
  enum class ExportFormat { chrome, csv, snapshot };
  void exportTo(const QString& out, ExportFormat format);

 signals:
  void stateShown();        // the allocator state and the tensors at the selected time are shown
  void compareShown();      // the other trace's curves are overlaid
  void differencesShown();  // the Compare tab lists the differences
  void compareFailed(const QString& message);
  void followed();        // a poll of the followed trace read new events
  void exported(bool ok, const QString& message);  // exportTo() finished
  void selectionShown();  // the Live in selection tab lists the selected range
  void opened();          // the timeline can paint
  void tablesShown();     // summary and tables filled
  void loaded();          // everything, the findings included
  void failed(const QString& message);

 public slots:
  void selectTime(quint64 ts);
  void pollFollow();
  // Lists what was allocated at some time in [from, to) (absolute), by site, in the "Live in
  // selection" tab (the timeline's shift+drag).
  void selectRange(quint64 from, quint64 to);
  // Shows the Details of the allocation at `addr` on `device` allocated at `alloc_ts`.
  void showDetails(qint64 device, quint64 addr, quint64 alloc_ts);
  // Shows the Details of tensor `tensor_id`: sizes, storage, block, views, lifetime, stack.
  void showTensorDetails(quint64 tensor_id);
  // Compare: opens `path` in the thread pool, overlays its curves on the timeline, then lists
  // the differences (analysis::diff, this trace as A) in the Compare tab.
  void compareWith(const QString& path);
  void setCompareAlign(TimelineWidget::Align align);
  // Follow: shows `path` while it is being recorded -- the curves of what was committed so
  // far, read again every `interval_ms` (only the new event blocks) -- and loads it fully
  // once the recording is finalized.
  void follow(const QString& path, int interval_ms = 500);
  void setFollow(bool on);  // on: follow this view's file; off: stop polling
  bool following() const;

 private:
  QWidget* makeTable(QAbstractItemModel* model, int sort_column);
  void showAllocator();
  void showState(StateAtTime state);
  struct Compared;
  struct Polled;
  void showCompared(Compared c);
  void showPolled(Polled p);
  void startDiff(TraceDataPtr other);
  void showDifferences(Compared c);
  void updateTabTitles();

  TraceLoader loader_;
  TraceDataPtr data_;
  QStackedWidget* stack_;
  QLabel* progress_label_;
  QProgressBar* progress_;
  QLabel* error_;
  TimelineWidget* timeline_;
  QComboBox* stacking_;
  QTabWidget* tabs_;
  QTextBrowser* summary_;
  SiteModel* live_model_;
  SiteModel* leak_model_;
  FlamePage* flame_page_;
  SyncSiteModel* sync_model_;
  StepModel* step_model_ = nullptr;
  QWidget* step_page_;
  QComboBox* device_;
  AllocatorWidget* allocator_;
  QScrollArea* allocator_scroll_;
  uint64_t allocator_ts_ = 0;
  bool time_selected_ = false;  // a click on the timeline chose allocator_ts_ (not the peak)
  QFutureWatcher<StateAtTime> allocator_watcher_;
  TensorModel* tensor_model_;
  struct Compared {
    TraceDataPtr data;
    std::vector<DiffRow> rows;
    QString error;
    // Per device of both traces (by name): the differential flame graphs of the peaks.
    std::vector<FlamePage::Compared> flames;
  };
  QFutureWatcher<Compared> compare_open_, compare_diff_;
  DiffModel* diff_model_;
  SiteModel* selection_model_;
  QWidget* selection_page_;
  QFutureWatcher<std::vector<SiteRow>> selection_watcher_;
  QFutureWatcher<std::pair<bool, QString>> export_watcher_;
  std::pair<uint64_t, uint64_t> selection_{0, 0};
  QWidget* compare_page_;
  QLabel* compare_label_;
  QComboBox* align_;
  struct Polled {
    TraceDataPtr data;  // null: nothing new, or the trace could not be read
    bool finalized = false;
    QString error;
  };
  QFutureWatcher<Polled> follow_watcher_;
  QTimer* follow_timer_;
  QString follow_path_;
  bool allocator_pending_ = false;
  bool allocator_started_ = false;
  bool synchronous_ = false;
  QTextBrowser* details_view_;
  std::optional<analysis::AllocationDetails> details_;
  std::optional<analysis::TensorDetails> tensor_details_;
};

}  // namespace tidemark::gui
