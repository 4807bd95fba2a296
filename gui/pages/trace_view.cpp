#include "gui/pages/trace_view.h"

#include <fstream>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QVBoxLayout>

#include "profiler/analysis/export.h"
#include "profiler/analysis/output_file.h"

namespace tidemark::gui {

TraceView::TraceView(QWidget* parent)
    : QWidget(parent),
      selection_(new ViewSelection(this)),
      export_(mode_, [this](std::pair<bool, QString> r) { emit exported(r.first, r.second); }) {
  stack_ = new QStackedWidget(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stack_);

  auto* loading = new QWidget;
  auto* ll = new QVBoxLayout(loading);
  progress_label_ = new QLabel(tr("Loading..."));
  progress_ = new QProgressBar;
  progress_->setRange(0, 100);
  ll->addStretch();
  ll->addWidget(progress_label_, 0, Qt::AlignHCenter);
  ll->addWidget(progress_);
  ll->addStretch();
  stack_->addWidget(loading);

  error_ = new QLabel;
  error_->setWordWrap(true);
  error_->setAlignment(Qt::AlignCenter);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  stack_->addWidget(error_);

  auto* split = new QSplitter(Qt::Vertical);
  auto* top = new QWidget;
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->setSpacing(0);
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(6, 2, 6, 0);
  stacking_ = new QComboBox;
  stacking_->addItems({tr("allocated"), tr("by category"), tr("by top site")});
  stacking_->setToolTip(tr("What fills the allocated area (View > Stack: Ctrl+1, Ctrl+2, Ctrl+3)"));
  bar->addWidget(new QLabel(tr("Timeline:")));
  bar->addWidget(stacking_);
  frames_ = new QComboBox;
  frames_->addItems({tr("User frames"), tr("All frames")});  // in analysis::Frames' order
  frames_->setToolTip(
      tr("Which frame of a stack names its site, in every table, flame graph and finding: the "
         "innermost of your own code, library frames folded in the flame graphs, or the "
         "innermost of any (tidemark --frames user|all)"));
  bar->addWidget(frames_);
  align_ = new QComboBox;
  align_->addItems({tr("aligned at the start"), tr("aligned at the first step")});
  align_->setToolTip(tr("How the compared trace's time lines up with this one's"));
  align_->setVisible(false);
  bar->addWidget(align_);
  bar->addStretch();
  tl->addLayout(bar);
  timeline_ = new TimelineWidget(mode_);
  tl->addWidget(timeline_, 1);
  split->addWidget(top);

  // The pages, in View's order; each observes the selection. The timeline is first: the
  // pages' answers (highlights) reach a timeline that shows the same trace.
  connect(selection_, &ViewSelection::dataChanged, timeline_,
          [this](const TraceDataPtr& data) { timeline_->setTraceData(data); });
  tabs_ = new QTabWidget;
  summary_ = new SummaryPage(selection_);
  live_model_ = make_site_model(this);
  live_ = new TraceTablePage(
      tr("Live at peak"), live_model_, 1,
      [m = live_model_](const TraceData& d) { m->setRows(d.live_at_peak); }, selection_);
  SiteModel* leak_model = make_site_model(this);
  leaks_ = new TraceTablePage(
      tr("Leaks"), leak_model, 1,
      [leak_model](const TraceData& d) { leak_model->setRows(d.leaks); }, selection_);
  flame_ = new FlameTab(selection_, mode_);
  SyncSiteModel* sync_model = make_sync_model(this);
  syncs_ = new TraceTablePage(
      tr("Syncs"), sync_model, 2,
      [sync_model](const TraceData& d) { sync_model->setRows(d.sync_sites); }, selection_);
  steps_ = new StepsPage(selection_);
  allocator_ = new AllocatorPage(selection_, mode_);
  tensor_model_ = make_tensor_model(this);
  tensors_ = new TensorsPage(tensor_model_, selection_);
  details_ = new DetailsPage(selection_, mode_);
  // Compare and Live in selection become tabs when first used; owned by the view until then.
  compare_ = new ComparePage(selection_, mode_);
  selection_model_ = make_site_model(this);
  selection_page_ = new SelectionPage(selection_model_, selection_, mode_);
  for (Page* p : {static_cast<Page*>(compare_), static_cast<Page*>(selection_page_)}) {
    p->setParent(this);
    p->hide();
  }
  for (Page* p :
       std::initializer_list<Page*>{summary_, live_, leaks_, flame_, syncs_, steps_, allocator_,
                                    tensors_, details_, compare_, selection_page_}) {
    if (!p->parent()) addPage(p);
    connect(p, &Page::titleChanged, this, [this, p](const QString& t) {
      if (const int i = tabs_->indexOf(p); i >= 0) tabs_->setTabText(i, t);
    });
    connect(p, &Page::showMe, this, [this, p] {
      addPage(p);
      tabs_->setCurrentWidget(p);
    });
  }
  split->addWidget(tabs_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  stack_->addWidget(split);

  connect(&loader_, &TraceLoader::progress, this, [this](int percent, const QString& what) {
    progress_->setValue(percent);
    progress_label_->setText(tr("Loading: %1").arg(what));
  });
  connect(&loader_, &TraceLoader::opened, this, &TraceView::setTraceData);
  connect(&loader_, &TraceLoader::tablesReady, this, &TraceView::setTraceData);
  connect(&loader_, &TraceLoader::finished, this, &TraceView::setTraceData);
  connect(&loader_, &TraceLoader::failed, this, [this](const QString& message) {
    loading_.clear();
    showFailure(message.contains("not finalized")
                    ? message + tr("\n\nA trace still being recorded: View > Follow (Ctrl+F) "
                                   "shows it growing.")
                    : message);
    emit failed(message);
  });

  // The timeline and the selection tell each other what the user chose.
  connect(timeline_, &TimelineWidget::timeSelected, selection_, &ViewSelection::selectTime);
  connect(timeline_, &TimelineWidget::rangeSelected, selection_, &ViewSelection::selectRange);
  connect(timeline_, &TimelineWidget::viewChanged, selection_, &ViewSelection::setZoom);
  connect(selection_, &ViewSelection::zoomed, timeline_, [this](quint64 from, quint64 to) {
    if (from != timeline_->viewFrom() || to != timeline_->viewTo()) timeline_->setView(from, to);
  });
  connect(selection_, &ViewSelection::highlighted, timeline_, &TimelineWidget::setHighlight);
  connect(selection_, &ViewSelection::stateChanged, this, &TraceView::stateShown);
  connect(selection_page_, &SelectionPage::listed, this, &TraceView::selectionShown);

  // Compare publishes its results in the selection: the compared trace's curves go on the
  // timeline (the flame tab takes the differential graphs itself).
  connect(selection_, &ViewSelection::comparedChanged, this, [this](const TraceDataPtr& other) {
    timeline_->setCompare(other, TimelineWidget::Align(align_->currentIndex()));
    align_->setVisible(true);
    emit compareShown();
  });
  connect(selection_, &ViewSelection::flameDiffsChanged, this, &TraceView::differencesShown);
  connect(compare_, &ComparePage::failed, this, &TraceView::compareFailed);
  connect(align_, &QComboBox::currentIndexChanged, this,
          [this](int i) { timeline_->setCompareAlign(TimelineWidget::Align(i)); });
  connect(stacking_, &QComboBox::currentIndexChanged, this,
          [this](int i) { timeline_->setStacking(TimelineWidget::Stacking(i)); });
  // Note [Frames in the GUI]: the toggle sets the selection's rule; the tables and findings
  // are computed again under it (the pages with queries of their own ask again themselves).
  connect(frames_, &QComboBox::currentIndexChanged, this,
          [this](int i) { selection_->setFrames(analysis::Frames(i)); });
  connect(selection_, &ViewSelection::framesChanged, this, [this] {
    const analysis::Frames frames = selection_->frames();
    {
      const QSignalBlocker block(frames_);
      frames_->setCurrentIndex(int(frames));
    }
    const TraceDataPtr& data = selection_->data();
    if (!loading_.isEmpty())  // a trace still opening: open it again, under the new rule
      loader_.load(loading_, frames);
    else if (data && data->session)
      loader_.reload(data, frames);
    // A followed recording has no sites yet: it loads under the rule once finalized.
  });

  follower_ = new Follower(selection_, mode_, this);
  connect(follower_, &Follower::read, this, [this](const TraceDataPtr& data) {
    setTraceData(data);
    emit followed();
  });
  connect(follower_, &Follower::finalized, this, &TraceView::load);
  connect(follower_, &Follower::failed, this, [this](const QString& error) {
    if (!selection_->data()) {  // the first read failed: nothing to show
      showFailure(error);
      emit failed(error);
    } else {
      summary_->showFollowStopped(error);
    }
  });
}

// Nothing to wait for: the loader stops at its next stage, and what the queries still run
// is dropped with them (Note [Async queries]). The widgets go first, before the selection
// they observe and tell, so nothing they signal while they go reaches a selection gone.
TraceView::~TraceView() {
  qDeleteAll(findChildren<QWidget*>(Qt::FindDirectChildrenOnly));
}

void TraceView::addPage(Page* p) {
  if (tabs_->indexOf(p) < 0) tabs_->addTab(p, p->title());
}

Page* TraceView::page(View v) const {
  switch (v) {
    case View::timeline:
      return nullptr;
    case View::summary:
      return summary_;
    case View::live:
      return live_;
    case View::leaks:
      return leaks_;
    case View::flame:
      return flame_;
    case View::syncs:
      return syncs_;
    case View::steps:
      return steps_;
    case View::allocator:
      return allocator_;
    case View::tensors:
      return tensors_;
    case View::details:
      return details_;
    case View::compare:
      return compare_;
    case View::selection:
      return selection_page_;
  }
  return nullptr;
}

void TraceView::showFailure(const QString& message) {
  error_->setText(message);
  stack_->setCurrentIndex(1);
}

void TraceView::follow(const QString& path, int interval_ms) {
  loader_.cancel();
  loading_.clear();
  progress_->setValue(0);
  progress_label_->setText(tr("Following %1").arg(path));
  stack_->setCurrentIndex(0);
  follower_->start(path, interval_ms);
}

bool TraceView::following() const {
  return follower_->active();
}

void TraceView::setFollow(bool on) {
  const TraceDataPtr& data = selection_->data();
  if (!on)
    follower_->stop();
  else if (data && data->live)
    follower_->resume();
  else if (data)
    follow(QString::fromStdString(data->path), follower_->interval());
}

void TraceView::pollFollow() {
  follower_->poll();
}

void TraceView::setCompareAlign(TimelineWidget::Align align) {
  align_->setCurrentIndex(int(align));  // the combo box tells the timeline
}

void TraceView::compareWith(const QString& path) {
  addPage(compare_);
  compare_->compareWith(path);
}

void TraceView::setStacking(TimelineWidget::Stacking s) {
  stacking_->setCurrentIndex(int(s));  // the combo box tells the timeline
}

void TraceView::setFrames(analysis::Frames frames) {
  selection_->setFrames(frames);  // the selection tells the combo box
}

void TraceView::showOffscreen(QSize size, TraceDataPtr data) {
  resize(size);
  setAttribute(Qt::WA_DontShowOnScreen);
  show();
  if (!data) return;
  setSynchronous(true);
  setTraceData(std::move(data));
}

void TraceView::setSynchronous(bool sync) {
  mode_->synchronous = sync;  // the timeline's and every page's queries
}

QString TraceView::tabTitle(View v) const {
  const int i = tabs_->indexOf(page(v));
  return i >= 0 ? tabs_->tabText(i) : QString();
}

void TraceView::showDetails(qint64 device, quint64 addr, quint64 alloc_ts) {
  selection_->showAllocation(device, addr, alloc_ts);
}

void TraceView::showTensorDetails(quint64 tensor_id) {
  selection_->showTensor(tensor_id);
}

void TraceView::selectRange(quint64 from, quint64 to) {
  selection_->selectRange(from, to);
}

void TraceView::selectTime(quint64 ts) {
  selection_->selectTime(ts);
}

QString TraceView::errorText() const {
  return error_->text();
}

void TraceView::load(const QString& path) {
  progress_->setValue(0);
  progress_label_->setText(tr("Loading %1").arg(path));
  stack_->setCurrentIndex(0);
  loading_ = path;
  loader_.load(path, selection_->frames());
}

void TraceView::setTraceData(TraceDataPtr data) {
  const TraceDataPtr before = selection_->data();
  const bool same = same_trace(before.get(), data.get());
  const bool had_tables = same && before->stage != Stage::opened;
  const Stage stage = data->stage;
  if (!same) loading_.clear();           // opened (or shown without a load)
  selection_->setData(std::move(data));  // the timeline and the pages show it
  if (!same) stack_->setCurrentIndex(2);
  switch (stage) {
    case Stage::opened:
      emit opened();
      break;
    case Stage::tables:
      emit tablesShown();
      break;
    case Stage::complete:
      if (!same) emit opened();
      if (!had_tables) emit tablesShown();
      emit loaded();
      break;
  }
}

void TraceView::exportTo(const QString& out, ExportFormat format) {
  const TraceDataPtr& data = selection_->data();
  if (!data || data->live || !data->session) {
    emit exported(false, data && data->live ? tr("Export: the trace is still being recorded")
                                            : tr("Export: no trace is open"));
    return;
  }
  if (export_.busy()) {
    emit exported(false, tr("Export: an export is already running"));
    return;
  }
  // The one export path the CLI takes too (analysis::export_to_file, Note [Output files]):
  // never the trace itself, written to a temporary renamed into place. A Trace is used by one
  // thread at a time, so the worker opens its own.
  const std::string trace = data->path;
  export_.request([trace, out, format](const auto&) -> std::pair<bool, QString> {
    try {
      const analysis::Trace t = analysis::Trace::open(trace);
      const analysis::ExportResult r = analysis::export_to_file(t, out.toStdString(), {format, {}});
      QString what;
      if (r.snapshot) {
        QStringList devices;
        for (const auto& d : r.snapshot->devices)
          devices << tr("%1 is device %2").arg(QString::fromStdString(d.name)).arg(d.index);
        what = tr(" (%1 entries; %2)").arg(r.snapshot->entries).arg(devices.join(", "));
      }
      return {true, tr("Exported %1%2").arg(out, what)};
    } catch (const std::exception& e) {
      return {false, tr("Export to %1 failed: %2").arg(out, QString::fromUtf8(e.what()))};
    }
  });
}

void TraceView::showView(View v) {
  Page* p = page(v);
  if (!p) {  // the timeline has no tab: the summary's
    tabs_->setCurrentWidget(summary_);
    timeline_->setFocus();
  } else if (tabs_->indexOf(p) >= 0) {  // Compare and Live in selection: once made
    tabs_->setCurrentWidget(p);
  }
}

}  // namespace tidemark::gui
