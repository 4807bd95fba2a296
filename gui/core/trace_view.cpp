#include "gui/core/trace_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "gui/core/allocator_widget.h"
#include "gui/core/summary_html.h"
#include "gui/core/timeline_widget.h"

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
  timeline_ = new TimelineWidget;
  split->addWidget(timeline_);
  tabs_ = new QTabWidget;
  summary_ = new QTextBrowser;
  tabs_->addTab(summary_, tr("Summary"));
  live_model_ = make_site_model(this);
  tabs_->addTab(makeTable(live_model_, 1), tr("Live at peak"));
  leak_model_ = make_site_model(this);
  tabs_->addTab(makeTable(leak_model_, 1), tr("Leaks"));
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
  details_view_ = new QTextBrowser;
  details_view_->setHtml(
      tr("<p><i>Click a block in the Allocator view, or double-click a row of Live at peak or "
         "Leaks (its largest allocation), to see its details here.</i></p>"));
  tabs_->addTab(details_view_, tr("Details"));
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
    error_->setText(message);
    stack_->setCurrentIndex(1);
    emit failed(message);
  });
  connect(timeline_, &TimelineWidget::timeSelected, this, &TraceView::selectTime);
  connect(device_, &QComboBox::currentIndexChanged, this, [this] { showAllocator(); });
  connect(allocator_, &AllocatorWidget::blockClicked, this, &TraceView::showDetails);
  connect(&allocator_watcher_, &QFutureWatcher<AllocatorState>::finished, this, [this] {
    allocator_->setState(allocator_watcher_.result());
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
  const QString wait = tr(" (computing…)");
  tabs_->setTabText(0, tr("Summary") + (findings ? QString() : wait));
  tabs_->setTabText(1, tr("Live at peak") + (tables ? QString() : wait));
  tabs_->setTabText(2, tr("Leaks") + (tables ? QString() : wait));
  tabs_->setTabText(3, tr("Syncs") + (tables ? QString() : wait));
  tabs_->setTabText(4, tr("Steps") + (tables ? QString() : wait));
}

void TraceView::showDetails(qint64 device, quint64 addr, quint64 alloc_ts) {
  if (!data_) return;
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
  connect(filter, &QLineEdit::textChanged, proxy, &QSortFilterProxyModel::setFilterFixedString);
  connect(view, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    const QVariantList a = index.data(AllocationRole).toList();
    if (a.size() == 3) showDetails(a[0].toLongLong(), a[1].toULongLong(), a[2].toULongLong());
  });
  connect(view->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
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
  const bool same_trace = data_ && data && data_->session == data->session;
  const bool had_tables = same_trace && data_->stage != Stage::opened;
  data_ = std::move(data);
  timeline_->setTraceData(data_);  // keeps the view for a later stage of the same trace
  summary_->setHtml(summary_html(*data_));
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
  if (!same_trace) {
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
      if (!same_trace) emit opened();
      if (!had_tables) emit tablesShown();
      emit loaded();
      break;
  }
}

void TraceView::selectTime(quint64 ts) {
  allocator_ts_ = ts;
  showAllocator();
}

// In the thread pool (through the session, like the timeline's queries); a request made while
// one runs is queued, so only the latest time is computed next.
void TraceView::showAllocator() {
  if (!data_ || data_->devices.empty()) return;
  const int i = std::max(0, device_->currentIndex());
  const int64_t dev = data_->devices[size_t(i)].id;
  auto query = [data = data_, dev, ts = allocator_ts_] {
    return data->session->with(
        [&](const analysis::Trace& trace) { return allocator_state(trace, dev, ts); });
  };
  if (synchronous_) {
    allocator_watcher_.waitForFinished();
    allocator_->setState(query());
    return;
  }
  if (allocator_watcher_.isRunning()) {
    allocator_pending_ = true;
    return;
  }
  allocator_watcher_.setFuture(QtConcurrent::run(query));
}

void TraceView::showView(View v) {
  switch (v) {
    case View::timeline:
      tabs_->setCurrentIndex(0);
      timeline_->setFocus();
      break;
    case View::summary:
      tabs_->setCurrentIndex(0);
      break;
    case View::live:
      tabs_->setCurrentIndex(1);
      break;
    case View::leaks:
      tabs_->setCurrentIndex(2);
      break;
    case View::syncs:
      tabs_->setCurrentIndex(3);
      break;
    case View::steps:
      tabs_->setCurrentIndex(4);
      break;
    case View::allocator:
      tabs_->setCurrentIndex(5);
      break;
    case View::details:
      tabs_->setCurrentIndex(6);
      break;
  }
}

}  // namespace tidemark::gui
