// The pages under a TraceView's timeline, one class per tab. Each owns its widgets, its models
// and its queries (AsyncQuery, Note [Async queries]); each observes the view's ViewSelection
// (the trace, the selected time, range and state) and changes it through its setters, so no
// page knows another. A page names itself (title(), titleChanged()) and asks to be shown
// (showMe(): the Details of a double-clicked row, a new selected range); the TraceView only
// puts pages in tabs, found by the page's identity.
#pragma once

#include <QWidget>
#include <functional>
#include <optional>

#include "gui/models/async_query.h"
#include "gui/models/table_models.h"
#include "gui/models/view_selection.h"
#include "gui/pages/flame_widget.h"

class QComboBox;
class QTableView;
class QTextBrowser;
class QAbstractItemModel;

namespace tidemark::gui {

class AllocatorWidget;
class SourceLinesPanel;

class Page : public QWidget {
  Q_OBJECT
 public:
  explicit Page(ViewSelection* selection, QWidget* parent = nullptr);
  QString title() const { return title_; }

 signals:
  void titleChanged(const QString& title);
  void showMe();  // the page has something new the user asked for

 protected:
  void setTitle(const QString& title);
  // `title` once `ready`, else marked as coming: once the followed recording is finalized, or
  // once the loader computed it.
  void setTitleOnceReady(const QString& title, bool ready);
  ViewSelection* selection_;

 private:
  QString title_;
};

// A table over `model` with a filter line, sorted by `sort_column` (descending). Selecting a
// row highlights its span on the timeline; double-clicking one shows the Details of its
// allocation or tensor (table_models.h: FromTsRole, ToTsRole, AllocationRole, TensorRole).
class TablePage : public Page {
  Q_OBJECT
 public:
  TablePage(const QString& title, QAbstractItemModel* model, int sort_column,
            ViewSelection* selection, QWidget* parent = nullptr);
  QTableView* table() const { return view_; }

 private:
  QTableView* view_;
};

// A table of the trace's rows from its tables stage on (Live at peak, Leaks, Syncs): `fill`
// puts the rows of each new TraceData into the model.
class TraceTablePage : public TablePage {
  Q_OBJECT
 public:
  TraceTablePage(const QString& title, QAbstractItemModel* model, int sort_column,
                 std::function<void(const TraceData&)> fill, ViewSelection* selection);
};

// The summary of the trace (summary_html.h), or of what a followed recording committed so far.
class SummaryPage : public Page {
  Q_OBJECT
 public:
  explicit SummaryPage(ViewSelection* selection);
  void showFollowStopped(const QString& error);

 private:
  QTextBrowser* text_;
};

// The steps table, made once the trace's origin is known (its times are relative to it).
class StepsPage : public Page {
  Q_OBJECT
 public:
  explicit StepsPage(ViewSelection* selection);

 private:
  StepModel* model_ = nullptr;
};

// The flame graphs (FlamePage): of the trace, of the selected time, and of Compare; beside
// them the source view (SourceLinesPanel): a file's lines with the bytes live at the peak.
class FlameTab : public Page {
  Q_OBJECT
 public:
  FlameTab(ViewSelection* selection, QueryModePtr mode);
  FlamePage* flame() const { return flame_; }
  SourceLinesPanel* sourceLines() const { return lines_; }

 private:
  FlamePage* flame_;
  SourceLinesPanel* lines_;
  TraceDataPtr
      lines_data_;  // what the source view was asked about: asked again on a new trace or rule
};

// The allocator's state on one device at the selected time (the device with the highest
// peak, at that peak, until a click on the timeline). Its query publishes the state
// (ViewSelection::setState) that the Tensors and Flame pages show too.
class AllocatorPage : public Page {
  Q_OBJECT
 public:
  AllocatorPage(ViewSelection* selection, QueryModePtr mode);
  AllocatorWidget* allocator() const { return allocator_; }

 private:
  void onData(const TraceDataPtr& data, bool same);
  void query();
  void show(StateAtTime state);

  QComboBox* device_;
  AllocatorWidget* allocator_;
  uint64_t ts_ = 0;
  bool started_ = false;  // the first query waits for the tables (the first paint never waits)
  AsyncQuery<StateAtTime> query_;
};

// The tensors live at the allocator page's time, on its device.
class TensorsPage : public TablePage {
  Q_OBJECT
 public:
  TensorsPage(TensorModel* model, ViewSelection* selection);
};

// The Details of one allocation or one tensor (summary_html.h), asked for through the
// selection; the span it lived is highlighted on the timeline.
class DetailsPage : public Page {
  Q_OBJECT
 public:
  DetailsPage(ViewSelection* selection, QueryModePtr mode);
  QString html() const;
  const std::optional<analysis::AllocationDetails>& details() const { return details_; }
  const std::optional<analysis::TensorDetails>& tensorDetails() const { return tensor_details_; }

 private:
  struct Found {
    std::optional<analysis::AllocationDetails> allocation;
    std::optional<analysis::TensorDetails> tensor;
    bool is_tensor = false;
    QString missing;  // what was asked for, when it was not found
    uint64_t origin_ns = 0, end_ns = 0;
  };
  void show(Found f);

  QTextBrowser* text_;
  std::optional<analysis::AllocationDetails> details_;
  std::optional<analysis::TensorDetails> tensor_details_;
  std::function<void()> ask_;  // asks for what is shown (again, under another rule for sites)
  AsyncQuery<Found> query_;
};

// Live in selection: what was allocated at some time in the selected range, by site (the
// timeline's shift+drag). A tab once first used.
class SelectionPage : public TablePage {
  Q_OBJECT
 public:
  SelectionPage(SiteModel* model, ViewSelection* selection, QueryModePtr mode);

 signals:
  void listed();  // the rows of the latest range are shown

 private:
  void query(uint64_t from, uint64_t to);
  AsyncQuery<std::vector<SiteRow>> query_;
};

}  // namespace tidemark::gui
