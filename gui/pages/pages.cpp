#include "gui/pages/pages.h"

#include <algorithm>

#include <QComboBox>
#include <QHeaderView>
#include <QLineEdit>
#include <QScreen>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "gui/models/summary_html.h"
#include "gui/pages/allocator_widget.h"
#include "gui/pages/source_lines.h"

namespace tidemark::gui {

namespace {

QVBoxLayout* bare_layout(QWidget* w) {
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 0, 0, 0);
  return l;
}

}  // namespace

Page::Page(ViewSelection* selection, QWidget* parent) : QWidget(parent), selection_(selection) {}

void Page::setTitle(const QString& title) {
  if (title == title_) return;
  title_ = title;
  emit titleChanged(title_);
}

void Page::setTitleOnceReady(const QString& title, bool ready) {
  // A followed recording has no tables until it is finalized.
  const TraceDataPtr& data = selection_->data();
  setTitle(ready ? title
                 : title + (data && data->live ? tr(" (once finalized)") : tr(" (computing…)")));
}

TablePage::TablePage(const QString& title, QAbstractItemModel* model, int sort_column,
                     ViewSelection* selection, QWidget* parent)
    : Page(selection, parent) {
  setTitle(title);
  QVBoxLayout* l = bare_layout(this);
  auto* filter = new QLineEdit;
  filter->setPlaceholderText(tr("Filter (all columns)"));
  filter->setClearButtonEnabled(true);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(model);
  proxy->setSortRole(SortRole);
  proxy->setFilterKeyColumn(-1);
  proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  auto* view = view_ = new QTableView;
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
    const int cap =
        std::max(240, view->screen() ? view->screen()->availableGeometry().width() / 3 : 480);
    for (int c = 0; c < view->model()->columnCount(); ++c)
      view->setColumnWidth(c, std::min(view->columnWidth(c), cap));
  };
  connect(proxy, &QAbstractItemModel::modelReset, view, fit_columns);
  connect(filter, &QLineEdit::textChanged, proxy, &QSortFilterProxyModel::setFilterFixedString);
  connect(view, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    const QVariantList a = index.data(AllocationRole).toList();
    if (a.size() == 3)
      selection_->showAllocation(a[0].toLongLong(), a[1].toULongLong(), a[2].toULongLong());
    if (const QVariant t = index.data(TensorRole); t.isValid())
      selection_->showTensor(t.toULongLong());
  });
  connect(view->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid() || current.data(ToTsRole).toULongLong() == 0) return;
            selection_->highlight(current.data(FromTsRole).toULongLong(),
                                  current.data(ToTsRole).toULongLong());
          });
  l->addWidget(filter);
  l->addWidget(view);
}

TraceTablePage::TraceTablePage(const QString& title, QAbstractItemModel* model, int sort_column,
                               std::function<void(const TraceData&)> fill, ViewSelection* selection)
    : TablePage(title, model, sort_column, selection) {
  setTitleOnceReady(title, false);
  connect(selection, &ViewSelection::dataChanged, this,
          [this, title, fill](const TraceDataPtr& data) {
            const bool ready = data->stage != Stage::opened;
            if (ready) fill(*data);
            setTitleOnceReady(title, ready);
          });
}

SummaryPage::SummaryPage(ViewSelection* selection) : Page(selection) {
  text_ = new QTextBrowser;
  bare_layout(this)->addWidget(text_);
  setTitleOnceReady(tr("Summary"), false);
  connect(selection, &ViewSelection::dataChanged, this, [this](const TraceDataPtr& data) {
    text_->setHtml(data->live ? follow_html(*data) : summary_html(*data));
    setTitleOnceReady(tr("Summary"), data->stage == Stage::complete);
  });
}

void SummaryPage::showFollowStopped(const QString& error) {
  text_->setHtml(tr("<p><b>Following stopped:</b> %1</p>").arg(error.toHtmlEscaped()));
}

StepsPage::StepsPage(ViewSelection* selection) : Page(selection) {
  bare_layout(this);
  setTitleOnceReady(tr("Steps"), false);
  connect(selection, &ViewSelection::dataChanged, this, [this](const TraceDataPtr& data) {
    const bool ready = data->stage != Stage::opened;
    if (ready) {
      if (!model_) {  // needs the origin
        model_ = make_step_model(data->origin_ns, this);
        layout()->addWidget(new TablePage(QString(), model_, 0, selection_));
      }
      model_->setRows(data->step_rows);
    }
    setTitleOnceReady(tr("Steps"), ready);
  });
}

FlameTab::FlameTab(ViewSelection* selection, QueryModePtr mode) : Page(selection) {
  flame_ = new FlamePage;
  lines_ = new SourceLinesPanel(std::move(mode));
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(flame_);
  split->addWidget(lines_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({600, 400});
  bare_layout(this)->addWidget(split);
  setTitleOnceReady(tr("Flame graph"), false);
  connect(selection, &ViewSelection::dataChanged, this, [this](const TraceDataPtr& data) {
    flame_->setData(data);
    if (data->stage != Stage::opened &&
        (!lines_data_ || lines_data_->path != data->path || lines_data_->frames != data->frames ||
         lines_data_->stage == Stage::opened)) {
      lines_data_ = data;
      lines_->setData(data);
    }
    setTitleOnceReady(tr("Flame graph"), data->stage != Stage::opened);
  });
  // The graph of what was live at a time the user selected (not at the peak shown first).
  connect(selection, &ViewSelection::stateChanged, this, [this] {
    const TraceDataPtr& data = selection_->data();
    const std::shared_ptr<const StateAtTime> state = selection_->state();
    if (!data || !state || !selection_->selectedTime()) return;
    for (size_t i = 0; i < data->devices.size(); ++i)
      if (data->devices[i].id == state->allocator.device_id)
        flame_->setSelectedTime(i, state->allocator.time_ns, state->flame);
  });
  // Compare's differential graphs.
  connect(selection, &ViewSelection::flameDiffsChanged, this,
          [this] { flame_->setCompared(selection_->flameDiffs()); });
}

AllocatorPage::AllocatorPage(ViewSelection* selection, QueryModePtr mode)
    : Page(selection), query_(std::move(mode), [this](StateAtTime s) { show(std::move(s)); }) {
  setTitle(tr("Allocator"));
  QVBoxLayout* l = bare_layout(this);
  device_ = new QComboBox;
  l->addWidget(device_);
  allocator_ = new AllocatorWidget;
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setWidget(allocator_);
  l->addWidget(scroll);
  connect(device_, &QComboBox::currentIndexChanged, this, [this] { query(); });
  connect(allocator_, &AllocatorWidget::blockClicked, selection, &ViewSelection::showAllocation);
  connect(selection, &ViewSelection::dataChanged, this, &AllocatorPage::onData);
  connect(selection, &ViewSelection::timeSelected, this, [this](quint64 ts) {
    ts_ = ts;
    query();
  });
  // The blocks' and tensors' sites and the flame graph of the time: under the new rule.
  connect(selection, &ViewSelection::framesChanged, this, [this] {
    if (started_) query();
  });
}

void AllocatorPage::onData(const TraceDataPtr& data, bool same) {
  if (!same) {
    // The device with the highest peak, at that peak, until a click.
    device_->blockSignals(true);
    device_->clear();
    size_t best = 0;
    for (size_t i = 0; i < data->devices.size(); ++i) {
      device_->addItem(QString::fromStdString(data->devices[i].name));
      if (data->peaks[i] &&
          (!data->peaks[best] || data->peaks[i]->bytes > data->peaks[best]->bytes))
        best = i;
    }
    device_->setCurrentIndex(int(best));
    device_->blockSignals(false);
    ts_ =
        best < data->peaks.size() && data->peaks[best] ? data->peaks[best]->ts_ns : data->origin_ns;
    started_ = false;
    query_.cancel();  // of the trace shown before
  }
  // The query shares the session with the timeline's: it waits for the tables, so the first
  // paint never waits for it.
  if (!started_ && data->stage != Stage::opened) {
    started_ = true;
    query();
  }
}

// In the thread pool (through the session, like the timeline's queries); latest wins.
void AllocatorPage::query() {
  const TraceDataPtr& data = selection_->data();
  if (!data || !data->session || data->devices.empty()) return;
  const int64_t dev = data->devices[size_t(std::max(0, device_->currentIndex()))].id;
  query_.request([data, dev, ts = ts_, frames = selection_->frames()](const auto&) {
    return with_frames(*data->session, frames,
                       [&](const analysis::Trace& trace) { return state_at(trace, dev, ts); });
  });
}

void AllocatorPage::show(StateAtTime state) {
  allocator_->setState(state.allocator);
  selection_->setState(std::make_shared<const StateAtTime>(std::move(state)));
}

TensorsPage::TensorsPage(TensorModel* model, ViewSelection* selection)
    : TablePage(tr("Tensors"), model, 0, selection) {
  connect(selection, &ViewSelection::stateChanged, this, [this, model] {
    const std::shared_ptr<const StateAtTime> state = selection_->state();
    if (!state) return;
    model->setRows(state->tensors);
    const TraceDataPtr& data = selection_->data();
    const uint64_t t = state->allocator.time_ns;
    setTitle(tr("Tensors (%1 at %2)")
                 .arg(model->rowCount())
                 .arg(data ? QString::fromStdString(data->time_text(t)) : duration_text(t)));
  });
}

DetailsPage::DetailsPage(ViewSelection* selection, QueryModePtr mode)
    : Page(selection), query_(std::move(mode), [this](Found f) { show(std::move(f)); }) {
  setTitle(tr("Details"));
  text_ = new QTextBrowser;
  bare_layout(this)->addWidget(text_);
  text_->setHtml(
      tr("<p><i>Click a block in the Allocator view, or double-click a row of Live at peak or "
         "Leaks (its largest allocation) or of Tensors, to see its details here.</i></p>"));
  connect(selection, &ViewSelection::allocationChosen, this,
          [this](qint64 device, quint64 addr, quint64 alloc_ts) {
            ask_ = [this, device, addr, alloc_ts] {
              const TraceDataPtr& data = selection_->data();
              if (!data || !data->session) return;
              query_.request(
                  [data, device, addr, alloc_ts, frames = selection_->frames()](const auto&) {
                    Found f{{}, {}, false, {}, data->origin_ns, data->end_ns};
                    f.allocation =
                        with_frames(*data->session, frames, [&](const analysis::Trace& trace) {
                          return find_allocation_details(trace, device, addr, alloc_ts);
                        });
                    if (!f.allocation)
                      f.missing = tr("<p>No allocation at 0x%1.</p>").arg(addr, 0, 16);
                    return f;
                  });
            };
            ask_();
          });
  connect(selection, &ViewSelection::tensorChosen, this, [this](quint64 tensor_id) {
    ask_ = [this, tensor_id] {
      const TraceDataPtr& data = selection_->data();
      if (!data || !data->session) return;
      query_.request([data, tensor_id, frames = selection_->frames()](const auto&) {
        Found f{{}, {}, true, {}, data->origin_ns, data->end_ns};
        f.tensor = with_frames(*data->session, frames, [&](const analysis::Trace& trace) {
          return analysis::tensor_details(trace, tensor_id);
        });
        if (!f.tensor) f.missing = tr("<p>No tensor %1 in the trace.</p>").arg(tensor_id);
        return f;
      });
    };
    ask_();
  });
  // The same allocation or tensor, its site named under the new rule; nothing of a trace
  // shown before.
  connect(selection, &ViewSelection::framesChanged, this, [this] {
    if (ask_) ask_();
  });
  connect(selection, &ViewSelection::dataChanged, this, [this](const TraceDataPtr&, bool same) {
    if (!same) ask_ = nullptr;
  });
}

QString DetailsPage::html() const {
  return text_->toHtml();
}

void DetailsPage::show(Found f) {
  if (f.is_tensor) {
    tensor_details_ = std::move(f.tensor);
    text_->setHtml(tensor_details_ ? tensor_details_html(*tensor_details_, f.origin_ns)
                                   : f.missing);
    if (tensor_details_) {
      const analysis::TensorRecord& t = tensor_details_->tensor;
      selection_->highlight(t.create_ts, t.release_ts.value_or(f.end_ns));
    }
  } else {
    details_ = std::move(f.allocation);
    text_->setHtml(details_ ? details_html(*details_, f.origin_ns) : f.missing);
    if (details_)
      selection_->highlight(details_->row.alloc_ts,
                            details_->row.free_requested_ts.value_or(f.end_ns));
  }
  emit showMe();
}

SelectionPage::SelectionPage(SiteModel* model, ViewSelection* selection, QueryModePtr mode)
    : TablePage(QString(), model, 1, selection),
      query_(std::move(mode), [this, model](std::vector<SiteRow> rows) {
        model->setRows(std::move(rows));
        emit listed();
      }) {
  connect(selection, &ViewSelection::rangeSelected, this, [this](quint64 from, quint64 to) {
    const TraceDataPtr& data = selection_->data();
    if (!data || !data->session || to <= from) return;
    setTitle(tr("Live in selection (%1 to %2)")
                 .arg(QString::fromStdString(data->time_text(from - data->origin_ns)),
                      QString::fromStdString(data->time_text(to - data->origin_ns))));
    emit showMe();
    query(from, to);
  });
  // The same range, its sites named under the new rule.
  connect(selection, &ViewSelection::framesChanged, this, [this] {
    if (const std::optional<Span> r = selection_->range(); r && r->second > r->first)
      query(r->first, r->second);
  });
}

void SelectionPage::query(uint64_t from, uint64_t to) {
  const TraceDataPtr& data = selection_->data();
  if (!data || !data->session) return;
  query_.request([data, from, to, frames = selection_->frames()](const auto&) {
    return with_frames(*data->session, frames, [&](const analysis::Trace& trace) {
      return live_in_selection(trace, from, to);
    });
  });
}

}  // namespace tidemark::gui
