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
  split->addWidget(tabs_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  stack_->addWidget(split);

  connect(&loader_, &TraceLoader::progress, this, [this](int percent, const QString& what) {
    progress_->setValue(percent);
    progress_label_->setText(tr("Loading: %1").arg(what));
  });
  connect(&loader_, &TraceLoader::finished, this, &TraceView::setTraceData);
  connect(&loader_, &TraceLoader::failed, this, [this](const QString& message) {
    error_->setText(message);
    stack_->setCurrentIndex(1);
    emit failed(message);
  });
  connect(timeline_, &TimelineWidget::timeSelected, this, &TraceView::selectTime);
  connect(device_, &QComboBox::currentIndexChanged, this, [this] { showAllocator(); });
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
  data_ = std::move(data);
  timeline_->setTraceData(data_);
  summary_->setHtml(summary_html(*data_));
  live_model_->setRows(data_->live_at_peak);
  leak_model_->setRows(data_->leaks);
  sync_model_->setRows(data_->sync_sites);
  if (!step_model_) {  // needs the origin
    step_model_ = make_step_model(data_->origin_ns, this);
    step_page_->layout()->addWidget(makeTable(step_model_, 0));
  }
  step_model_->setRows(data_->step_rows);
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
  showAllocator();
  stack_->setCurrentIndex(2);
  emit loaded();
}

void TraceView::selectTime(quint64 ts) {
  allocator_ts_ = ts;
  showAllocator();
}

void TraceView::showAllocator() {
  if (!data_ || data_->devices.empty()) return;
  const int i = std::max(0, device_->currentIndex());
  const int64_t dev = data_->devices[size_t(i)].id;
  allocator_->setState(data_->session->with(
      [&](const analysis::Trace& trace) { return allocator_state(trace, dev, allocator_ts_); }));
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
  }
}

}  // namespace tidemark::gui
