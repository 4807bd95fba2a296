#include "gui/core/trace_view.h"

#include <algorithm>
#include <fstream>

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QScreen>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "gui/core/allocator_widget.h"
#include "gui/core/flame_widget.h"
#include "gui/core/summary_html.h"
#include "gui/core/timeline_widget.h"
#include "profiler/analysis/export.h"
#include "profiler/analysis/output_file.h"

namespace tidemark::gui {

TraceView::TraceView(QWidget* parent) : QWidget(parent) {
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
  align_ = new QComboBox;
  align_->addItems({tr("aligned at the start"), tr("aligned at the first step")});
  align_->setToolTip(tr("How the compared trace's time lines up with this one's"));
  align_->setVisible(false);
  bar->addWidget(align_);
  bar->addStretch();
  tl->addLayout(bar);
  timeline_ = new TimelineWidget;
  tl->addWidget(timeline_, 1);
  split->addWidget(top);
  tabs_ = new QTabWidget;
  summary_ = new QTextBrowser;
  tabs_->addTab(summary_, tr("Summary"));
  live_model_ = make_site_model(this);
  tabs_->addTab(makeTable(live_model_, 1), tr("Live at peak"));
  leak_model_ = make_site_model(this);
  tabs_->addTab(makeTable(leak_model_, 1), tr("Leaks"));
  flame_page_ = new FlamePage;
  tabs_->addTab(flame_page_, tr("Flame graph"));
  sync_model_ = make_sync_model(this);
  tabs_->addTab(makeTable(sync_model_, 2), tr("Syncs"));
  step_page_ = new QWidget;
  step_page_->setLayout(new QVBoxLayout);
  step_page_->layout()->setContentsMargins(0, 0, 0, 0);
  tabs_->addTab(step_page_, tr("Steps"));
  auto* alloc_page = new QWidget;
  auto* al = new QVBoxLayout(alloc_page);
  al->setContentsMargins(0, 0, 0, 0);
  device_ = new QComboBox;
  al->addWidget(device_);
  allocator_ = new AllocatorWidget;
  allocator_scroll_ = new QScrollArea;
  allocator_scroll_->setWidgetResizable(true);
  allocator_scroll_->setWidget(allocator_);
  al->addWidget(allocator_scroll_);
  tabs_->addTab(alloc_page, tr("Allocator"));
  tensor_model_ = make_tensor_model(this);
  tabs_->addTab(makeTable(tensor_model_, 0), tr("Tensors"));
  details_view_ = new QTextBrowser;
  details_view_->setHtml(
      tr("<p><i>Click a block in the Allocator view, or double-click a row of Live at peak or "
         "Leaks (its largest allocation) or of Tensors, to see its details here.</i></p>"));
  tabs_->addTab(details_view_, tr("Details"));
  selection_model_ = make_site_model(this);
  selection_page_ = makeTable(selection_model_, 1);
  // Compare and Live in selection become tabs when first used; owned by the view until then.
  selection_page_->setParent(this);
  selection_page_->hide();
  compare_page_ = new QWidget(this);
  compare_page_->hide();
  auto* cl = new QVBoxLayout(compare_page_);
  cl->setContentsMargins(0, 0, 0, 0);
  compare_label_ = new QLabel;
  compare_label_->setWordWrap(true);
  cl->addWidget(compare_label_);
  diff_model_ = make_diff_model(this);
  cl->addWidget(makeTable(diff_model_, 5));
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
    error_->setText(message.contains("not finalized")
                        ? message + tr("\n\nA trace still being recorded: View > Follow (Ctrl+F) "
                                       "shows it growing.")
                        : message);
    stack_->setCurrentIndex(1);
    emit failed(message);
  });
  connect(timeline_, &TimelineWidget::timeSelected, this, &TraceView::selectTime);
  connect(timeline_, &TimelineWidget::rangeSelected, this, &TraceView::selectRange);
  connect(&export_watcher_, &QFutureWatcherBase::finished, this, [this] {
    auto [ok, message] = export_watcher_.result();
    emit exported(ok, message);
  });
  connect(&selection_watcher_, &QFutureWatcher<std::vector<SiteRow>>::finished, this, [this] {
    selection_model_->setRows(selection_watcher_.result());
    emit selectionShown();
  });
  connect(align_, &QComboBox::currentIndexChanged, this,
          [this](int i) { timeline_->setCompareAlign(TimelineWidget::Align(i)); });
  follow_timer_ = new QTimer(this);
  connect(follow_timer_, &QTimer::timeout, this, &TraceView::pollFollow);
  connect(&follow_watcher_, &QFutureWatcher<Polled>::finished, this,
          [this] { showPolled(follow_watcher_.result()); });
  connect(&compare_open_, &QFutureWatcher<Compared>::finished, this,
          [this] { showCompared(compare_open_.result()); });
  connect(&compare_diff_, &QFutureWatcher<Compared>::finished, this,
          [this] { showDifferences(compare_diff_.result()); });
  connect(stacking_, &QComboBox::currentIndexChanged, this,
          [this](int i) { timeline_->setStacking(TimelineWidget::Stacking(i)); });
  connect(device_, &QComboBox::currentIndexChanged, this, [this] { showAllocator(); });
  connect(allocator_, &AllocatorWidget::blockClicked, this, &TraceView::showDetails);
  connect(&allocator_watcher_, &QFutureWatcher<StateAtTime>::finished, this, [this] {
    showState(allocator_watcher_.result());
    if (allocator_pending_) {
      allocator_pending_ = false;
      showAllocator();
    }
  });
  updateTabTitles();
}

TraceView::~TraceView() {
  loader_.cancel();
  allocator_watcher_.waitForFinished();
  compare_open_.waitForFinished();
  compare_diff_.waitForFinished();
  selection_watcher_.waitForFinished();
  follow_timer_->stop();
  follow_watcher_.waitForFinished();
}

void TraceView::follow(const QString& path, int interval_ms) {
  loader_.cancel();
  follow_timer_->stop();
  follow_watcher_.waitForFinished();
  follow_path_ = path;
  follow_timer_->setInterval(interval_ms);
  progress_->setValue(0);
  progress_label_->setText(tr("Following %1").arg(path));
  stack_->setCurrentIndex(0);
  auto open = [path]() -> Polled {
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      TraceDataPtr data = follow_trace_data(path.toStdString());
      return {data, data == nullptr, {}};  // null: finalized already, loaded fully
    } catch (const std::exception& e) {
      const QString m = QString::fromStdString(e.what());
      return {nullptr, false, m.contains(path) ? m : path + ": " + m};
    }
  };
  if (synchronous_)
    showPolled(open());
  else
    follow_watcher_.setFuture(QtConcurrent::run(open));
  follow_timer_->start();
}

bool TraceView::following() const {
  return follow_timer_->isActive();
}

void TraceView::setFollow(bool on) {
  if (!on) {
    follow_timer_->stop();
    return;
  }
  if (data_ && data_->live)
    follow_timer_->start();
  else if (data_)
    follow(QString::fromStdString(data_->path), follow_timer_->interval());
}

// In the thread pool: the event blocks committed since the last poll (LiveTrace::poll).
void TraceView::pollFollow() {
  if (!data_ || !data_->live || follow_watcher_.isRunning()) return;
  auto poll = [data = data_]() -> Polled {
    try {
      TraceDataPtr next = poll_trace_data(*data);
      const bool done =
          data->live->with([](const analysis::LiveTrace& l) { return l.finalized(); });
      return {next, done, {}};
    } catch (const std::exception& e) {
      return {nullptr, false, QString::fromStdString(e.what())};
    }
  };
  if (synchronous_)
    showPolled(poll());
  else
    follow_watcher_.setFuture(QtConcurrent::run(poll));
}

void TraceView::showPolled(Polled p) {
  if (!p.error.isEmpty()) {
    follow_timer_->stop();
    if (!data_) {  // the first read failed: nothing to show
      error_->setText(p.error);
      stack_->setCurrentIndex(1);
      emit failed(p.error);
    } else {
      summary_->setHtml(tr("<p><b>Following stopped:</b> %1</p>").arg(p.error.toHtmlEscaped()));
    }
    return;
  }
  if (p.data) {
    setTraceData(p.data);
    emit followed();
  }
  if (p.finalized) {  // the recording ended: everything, tables and findings included
    follow_timer_->stop();
    load(follow_path_);
  }
}

void TraceView::setCompareAlign(TimelineWidget::Align align) {
  align_->setCurrentIndex(int(align));  // the combo box tells the timeline
}

void TraceView::compareWith(const QString& path) {
  if (tabs_->indexOf(compare_page_) < 0) tabs_->addTab(compare_page_, tr("Compare"));
  compare_label_->setText(tr("Opening %1…").arg(path));
  diff_model_->setRows({});
  auto open = [path]() -> Compared {
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      return {open_trace_data(path.toStdString()), {}, {}};
    } catch (const std::exception& e) {
      const QString m = QString::fromStdString(e.what());
      return {nullptr, {}, m.contains(path) ? m : path + ": " + m};
    }
  };
  if (synchronous_) {
    showCompared(open());
    return;
  }
  compare_open_.setFuture(QtConcurrent::run(open));
}

void TraceView::showCompared(Compared c) {
  if (!c.data) {
    compare_label_->setText(c.error);
    emit compareFailed(c.error);
    return;
  }
  timeline_->setCompare(c.data, TimelineWidget::Align(align_->currentIndex()));
  align_->setVisible(true);
  emit compareShown();
  startDiff(c.data);
}

// analysis::diff on connections of its own (A's path, B's path), off the GUI thread.
void TraceView::startDiff(TraceDataPtr other) {
  const std::string a = data_ ? data_->path : std::string(), b = other->path;
  auto diff = [a, b]() -> Compared {
    try {
      const analysis::Trace ta = analysis::Trace::open(a), tb = analysis::Trace::open(b);
      Compared c{nullptr, diff_rows(analysis::diff(ta, tb)), {}, {}};
      for (const analysis::DeviceRef& da : ta.devices())
        for (const analysis::DeviceRef& db : tb.devices())
          if (da.name == db.name) {
            const analysis::FlameNode fa = analysis::flame_at_peak(ta, da.id),
                                      fb = analysis::flame_at_peak(tb, db.id);
            c.flames.push_back({da.name, analysis::flame_diff(fa, fb), analysis::flame_diff(fb, fa)});
          }
      return c;
    } catch (const std::exception& e) {
      return {nullptr, {}, QString::fromStdString(e.what())};
    }
  };
  compare_label_->setText(
      tr("Comparing with %1: computing the differences…").arg(QString::fromStdString(b)));
  if (synchronous_) {
    showDifferences(diff());
    return;
  }
  compare_diff_.setFuture(QtConcurrent::run(diff));
}

void TraceView::showDifferences(Compared c) {
  const TraceDataPtr other = timeline_->compareData();
  if (!c.error.isEmpty()) {
    compare_label_->setText(c.error);
    return;
  }
  diff_model_->setRows(std::move(c.rows));
  flame_page_->setCompared(std::move(c.flames));
  compare_label_->setText(
      tr("<b>A</b> %1 (solid) vs <b>B</b> %2 (dashed): what grew or shrank at the allocated "
         "peak, B - A (as <tt>tidemark diff</tt>).")
          .arg(QString::fromStdString(data_ ? data_->path : std::string()).toHtmlEscaped(),
               QString::fromStdString(other ? other->path : std::string()).toHtmlEscaped()));
  emit differencesShown();
}

void TraceView::setStacking(TimelineWidget::Stacking s) {
  stacking_->setCurrentIndex(int(s));  // the combo box tells the timeline
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
  synchronous_ = sync;
  timeline_->setSynchronous(sync);
}

QString TraceView::detailsHtml() const {
  return details_view_->toHtml();
}

QString TraceView::tabTitle(View v) const {
  const int i = int(v) - 1;  // the timeline has no tab
  return i >= 0 && i < tabs_->count() ? tabs_->tabText(i) : QString();
}

void TraceView::updateTabTitles() {
  const bool tables = data_ && data_->stage != Stage::opened;
  const bool findings = data_ && data_->stage == Stage::complete;
  // A followed recording has no tables until it is finalized.
  const QString wait = data_ && data_->live ? tr(" (once finalized)") : tr(" (computing…)");
  const std::pair<View, QString> titles[] = {
      {View::summary, tr("Summary")}, {View::live, tr("Live at peak")},
      {View::leaks, tr("Leaks")},     {View::flame, tr("Flame graph")},
      {View::syncs, tr("Syncs")},     {View::steps, tr("Steps")}};
  for (const auto& [v, title] : titles)
    tabs_->setTabText(int(v) - 1, title + ((v == View::summary ? findings : tables) ? QString() : wait));
}

void TraceView::showDetails(qint64 device, quint64 addr, quint64 alloc_ts) {
  if (!data_ || !data_->session) return;
  details_ = data_->session->with([&](const analysis::Trace& trace) {
    return find_allocation_details(trace, device, addr, alloc_ts);
  });
  details_view_->setHtml(details_ ? details_html(*details_, data_->origin_ns)
                                  : tr("<p>No allocation at 0x%1.</p>").arg(addr, 0, 16));
  if (details_) {
    const uint64_t end = details_->row.free_requested_ts.value_or(data_->end_ns);
    timeline_->setHighlight(details_->row.alloc_ts, end);
  }
  tabs_->setCurrentWidget(details_view_);
}

QString TraceView::errorText() const {
  return error_->text();
}

QWidget* TraceView::makeTable(QAbstractItemModel* model, int sort_column) {
  auto* page = new QWidget;
  auto* l = new QVBoxLayout(page);
  l->setContentsMargins(0, 0, 0, 0);
  auto* filter = new QLineEdit;
  filter->setPlaceholderText(tr("Filter (all columns)"));
  filter->setClearButtonEnabled(true);
  auto* proxy = new QSortFilterProxyModel(page);
  proxy->setSourceModel(model);
  proxy->setSortRole(SortRole);
  proxy->setFilterKeyColumn(-1);
  proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  auto* view = new QTableView;
  view->setModel(proxy);
  view->setSortingEnabled(true);
  view->sortByColumn(sort_column, Qt::DescendingOrder);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setSelectionMode(QAbstractItemView::SingleSelection);
  view->horizontalHeader()->setStretchLastSection(true);
  view->verticalHeader()->hide();
  // Columns as wide as what the visible rows hold (sites and stacks are the long ones), up to
  // a third of the screen, when the model is filled (not on sorting: a user's widths stay).
  auto fit_columns = [view] {
    view->resizeColumnsToContents();
    const int cap = std::max(240, view->screen() ? view->screen()->availableGeometry().width() / 3 : 480);
    for (int c = 0; c < view->model()->columnCount(); ++c)
      view->setColumnWidth(c, std::min(view->columnWidth(c), cap));
  };
  connect(proxy, &QAbstractItemModel::modelReset, view, fit_columns);
  connect(filter, &QLineEdit::textChanged, proxy, &QSortFilterProxyModel::setFilterFixedString);
  connect(view, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    const QVariantList a = index.data(AllocationRole).toList();
    if (a.size() == 3) showDetails(a[0].toLongLong(), a[1].toULongLong(), a[2].toULongLong());
    if (const QVariant t = index.data(TensorRole); t.isValid()) showTensorDetails(t.toULongLong());
  });
  connect(view->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid() || current.data(ToTsRole).toULongLong() == 0) return;
            timeline_->setHighlight(current.data(FromTsRole).toULongLong(),
                                    current.data(ToTsRole).toULongLong());
          });
  l->addWidget(filter);
  l->addWidget(view);
  return page;
}

void TraceView::load(const QString& path) {
  progress_->setValue(0);
  progress_label_->setText(tr("Loading %1").arg(path));
  stack_->setCurrentIndex(0);
  loader_.load(path);
}

void TraceView::setTraceData(TraceDataPtr data) {
  const bool same = same_trace(data_.get(), data.get());
  const bool had_tables = same && data_->stage != Stage::opened;
  data_ = std::move(data);
  timeline_->setTraceData(data_);  // keeps the view for a later stage of the same trace
  summary_->setHtml(data_->live ? follow_html(*data_) : summary_html(*data_));
  flame_page_->setData(data_);
  if (data_->stage != Stage::opened) {
    live_model_->setRows(data_->live_at_peak);
    leak_model_->setRows(data_->leaks);
    sync_model_->setRows(data_->sync_sites);
    if (!step_model_) {  // needs the origin
      step_model_ = make_step_model(data_->origin_ns, this);
      step_page_->layout()->addWidget(makeTable(step_model_, 0));
    }
    step_model_->setRows(data_->step_rows);
  }
  updateTabTitles();
  if (!same) {
    // The allocator shows the device with the highest peak, at that peak, until a click.
    device_->blockSignals(true);
    device_->clear();
    size_t best = 0;
    for (size_t i = 0; i < data_->devices.size(); ++i) {
      device_->addItem(QString::fromStdString(data_->devices[i].name));
      if (data_->peaks[i] &&
          (!data_->peaks[best] || data_->peaks[i]->bytes > data_->peaks[best]->bytes))
        best = i;
    }
    device_->setCurrentIndex(int(best));
    device_->blockSignals(false);
    allocator_ts_ = best < data_->peaks.size() && data_->peaks[best] ? data_->peaks[best]->ts_ns
                                                                     : data_->origin_ns;
    allocator_started_ = false;
    time_selected_ = false;
    stack_->setCurrentIndex(2);
  }
  // The allocator's query shares the session with the timeline's: it waits for the tables,
  // so the first paint never waits for it.
  if (!allocator_started_ && data_->stage != Stage::opened) {
    allocator_started_ = true;
    showAllocator();
  }
  switch (data_->stage) {
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

void TraceView::showState(StateAtTime state) {
  if (time_selected_ && data_)
    for (size_t i = 0; i < data_->devices.size(); ++i)
      if (data_->devices[i].id == state.allocator.device_id)
        flame_page_->setSelectedTime(i, state.allocator.time_ns, std::move(state.flame));
  allocator_->setState(std::move(state.allocator));
  tensor_model_->setRows(std::move(state.tensors));
  tabs_->setTabText(int(View::tensors) - 1, tr("Tensors (%1 at %2)")
                                                .arg(tensor_model_->rowCount())
                                                .arg(data_ ? QString::fromStdString(data_->time_text(allocator_->state().time_ns))
                                                           : duration_text(allocator_->state().time_ns)));
  emit stateShown();
}

void TraceView::showTensorDetails(quint64 tensor_id) {
  if (!data_ || !data_->session) return;
  tensor_details_ = data_->session->with(
      [&](const analysis::Trace& trace) { return analysis::tensor_details(trace, tensor_id); });
  details_view_->setHtml(tensor_details_ ? tensor_details_html(*tensor_details_, data_->origin_ns)
                                         : tr("<p>No tensor %1 in the trace.</p>").arg(tensor_id));
  if (tensor_details_) {
    const analysis::SharedTensor& t = tensor_details_->tensor;
    timeline_->setHighlight(t.create_ts, t.release_ts.value_or(data_->end_ns));
  }
  tabs_->setCurrentWidget(details_view_);
}

void TraceView::selectRange(quint64 from, quint64 to) {
  if (!data_ || !data_->session || to <= from) return;
  if (tabs_->indexOf(selection_page_) < 0) tabs_->addTab(selection_page_, {});
  tabs_->setTabText(
      tabs_->indexOf(selection_page_),
      tr("Live in selection (%1 to %2)")
          .arg(QString::fromStdString(data_->time_text(from - data_->origin_ns)),
               QString::fromStdString(data_->time_text(to - data_->origin_ns))));
  tabs_->setCurrentWidget(selection_page_);
  auto query = [data = data_, from, to] {
    return data->session->with(
        [&](const analysis::Trace& trace) { return live_in_selection(trace, from, to); });
  };
  selection_watcher_.waitForFinished();  // one at a time; the latest selection wins
  if (synchronous_) {
    selection_model_->setRows(query());
    emit selectionShown();
    return;
  }
  selection_watcher_.setFuture(QtConcurrent::run(query));
}

void TraceView::selectTime(quint64 ts) {
  allocator_ts_ = ts;
  time_selected_ = true;
  showAllocator();
}

// In the thread pool (through the session, like the timeline's queries); a request made while
// one runs is queued, so only the latest time is computed next.
void TraceView::showAllocator() {
  if (!data_ || !data_->session || data_->devices.empty()) return;
  const int i = std::max(0, device_->currentIndex());
  const int64_t dev = data_->devices[size_t(i)].id;
  auto query = [data = data_, dev, ts = allocator_ts_] {
    return data->session->with(
        [&](const analysis::Trace& trace) { return state_at(trace, dev, ts); });
  };
  if (synchronous_) {
    allocator_watcher_.waitForFinished();
    showState(query());
    return;
  }
  if (allocator_watcher_.isRunning()) {
    allocator_pending_ = true;
    return;
  }
  allocator_watcher_.setFuture(QtConcurrent::run(query));
}

void TraceView::exportTo(const QString& out, ExportFormat format) {
  if (!data_ || data_->live || !data_->session) {
    emit exported(false, data_ && data_->live ? tr("Export: the trace is still being recorded")
                                              : tr("Export: no trace is open"));
    return;
  }
  if (export_watcher_.isRunning()) {
    emit exported(false, tr("Export: an export is already running"));
    return;
  }
  const std::string trace = data_->path;
  // Note [Output files]: never the trace itself; written to a temporary renamed into place.
  std::shared_ptr<analysis::OutputFile> file;
  try {
    file =
        std::make_shared<analysis::OutputFile>(out.toStdString(), std::vector<std::string>{trace});
  } catch (const analysis::OutputError&) {
    emit exported(false, tr("Export: %1 is the trace itself").arg(out));
    return;
  }
  auto run = [trace, out, format, file]() -> std::pair<bool, QString> {
    try {
      std::ofstream& f = file->stream();
      QString what;
      if (format == ExportFormat::chrome) {
        analysis::export_chrome(trace, f);
      } else if (format == ExportFormat::csv) {
        analysis::export_csv(trace, f);
      } else {
        analysis::SnapshotExport s = analysis::export_snapshot(trace, f);
        QStringList devices;
        for (const auto& d : s.devices)
          devices << tr("%1 is device %2").arg(QString::fromStdString(d.name)).arg(d.index);
        what = tr(" (%1 entries; %2)").arg(s.entries).arg(devices.join(", "));
      }
      file->commit();
      return {true, tr("Exported %1%2").arg(out, what)};
    } catch (const std::exception& e) {
      // The temporary goes with `file`: the lambda's copy is the last one.
      return {false, tr("Export to %1 failed: %2").arg(out, QString::fromUtf8(e.what()))};
    }
  };
  if (synchronous_) {
    auto [ok, message] = run();
    emit exported(ok, message);
    return;
  }
  export_watcher_.setFuture(QtConcurrent::run(run));
}

void TraceView::showView(View v) {
  if (v == View::compare || v == View::selection) {  // tabs made when first used
    QWidget* page = v == View::compare ? compare_page_ : selection_page_;
    if (tabs_->indexOf(page) >= 0) tabs_->setCurrentWidget(page);
    return;
  }
  tabs_->setCurrentIndex(std::max(0, int(v) - 1));  // the timeline has no tab: the summary's
  if (v == View::timeline) timeline_->setFocus();
}

}  // namespace tidemark::gui
