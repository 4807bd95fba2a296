// TraceView: one open trace (one tab of the main window). Until the trace opens it shows
// progress; a failure shows the loader's message; then the timeline above (as soon as the
// trace opens) and, below it, the pages (pages.h, one class per tab): the summary, the tables,
// the flame graphs, the allocator state at the selected time and the details of a selected
// allocation, each filled as the loader's stages arrive ("computing…" until then). The view
// owns the ViewSelection its timeline and pages share, the QueryMode of all their queries
// (Note [Async queries]), and the workflows that are no page: loading, Follow and Export.
#pragma once

#include <QWidget>
#include <optional>

#include "gui/models/async_query.h"
#include "gui/models/follower.h"
#include "gui/models/trace_loader.h"
#include "gui/models/view_selection.h"
#include "gui/pages/compare_page.h"
#include "gui/pages/pages.h"
#include "gui/pages/timeline_widget.h"
#include "profiler/analysis/export.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QStackedWidget;
class QTabWidget;

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
  // Which frames name a site, in every page (Note [Frames in the GUI]): the user's (the
  // default; flame graphs fold library frames) or any. The toggle above the timeline.
  void setFrames(analysis::Frames frames);

  TraceDataPtr traceData() const { return selection_->data(); }
  ViewSelection* selection() const { return selection_; }
  TimelineWidget* timeline() const { return timeline_; }
  AllocatorWidget* allocator() const { return allocator_->allocator(); }
  FlamePage* flamePage() const { return flame_->flame(); }
  SiteModel* liveModel() const { return live_model_; }
  TensorModel* tensorModel() const { return tensor_model_; }
  DiffModel* diffModel() const { return compare_->model(); }
  SiteModel* selectionModel() const { return selection_model_; }
  QString errorText() const;
  QString detailsHtml() const { return details_->html(); }
  const std::optional<analysis::AllocationDetails>& details() const { return details_->details(); }
  const std::optional<analysis::TensorDetails>& tensorDetails() const {
    return details_->tensorDetails();
  }
  // The title of v's tab (empty: the timeline, or a tab not made yet).
  QString tabTitle(View v) const;
  // Export (analysis/export.h, docs/export.md): writes this view's trace to `out` in the
  // thread pool, through a temporary file of its own renamed into place (analysis::OutputFile,
  // Note [Output files]), so a failed export leaves `out` as it was; then emits exported() with
  // a line for the status bar. Not while following, nor onto the trace itself.
  using ExportFormat = analysis::ExportFormat;
  void exportTo(const QString& out, ExportFormat format);

 signals:
  void stateShown();        // the allocator state and the tensors at the selected time are shown
  void compareShown();      // the other trace's curves are overlaid
  void differencesShown();  // the Compare tab lists the differences
  void compareFailed(const QString& message);
  void followed();                                 // a poll of the followed trace read new events
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
  Page* page(View v) const;
  void addPage(Page* page);  // as a tab, unless it is one
  void showFailure(const QString& message);

  QueryModePtr mode_ = std::make_shared<QueryMode>();
  ViewSelection* selection_;
  TraceLoader loader_;
  QStackedWidget* stack_;
  QLabel* progress_label_;
  QProgressBar* progress_;
  QLabel* error_;
  TimelineWidget* timeline_;
  QComboBox* stacking_;
  QComboBox* frames_;
  QComboBox* align_;
  QString loading_;  // the path of a load() whose trace has not opened yet
  QTabWidget* tabs_;
  SummaryPage* summary_;
  TraceTablePage *live_, *leaks_, *syncs_;
  SiteModel* live_model_;
  StepsPage* steps_;
  FlameTab* flame_;
  AllocatorPage* allocator_;
  TensorsPage* tensors_;
  TensorModel* tensor_model_;
  DetailsPage* details_;
  ComparePage* compare_;  // a tab once first used, like selection_page_
  SelectionPage* selection_page_;
  SiteModel* selection_model_;
  Follower* follower_;
  AsyncQuery<std::pair<bool, QString>> export_;
};

}  // namespace tidemark::gui
