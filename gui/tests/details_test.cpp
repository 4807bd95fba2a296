// The Details view: a recording of samples/pitfalls/view_retention (`tidemark record --stacks
// 32`), whose small views keep each 4 MiB batch's storage alive. The details of a batch's
// allocation -- opened from the allocator view (a click on its block) and from the Live at
// peak table (a double-click) -- name the view that kept it alive.
#include <QComboBox>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

#include "gui/pages/allocator_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;

namespace {

// The table showing `model` (through its sort and filter proxy).
QTableView* table_over(const TraceView& view, const QAbstractItemModel* model) {
  for (QTableView* t : view.findChildren<QTableView*>()) {
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(t->model());
    if (proxy && proxy->sourceModel() == model) return t;
  }
  return nullptr;
}

constexpr uint64_t kBatchBytes = 1024 * 1024 * 4;  // the sample's 1024x1024 float32 batch

}  // namespace

class DetailsTest : public QObject {
  Q_OBJECT
 private:
  TraceDataPtr data_;

  void checkBatchDetails(const TraceView& view) {
    QVERIFY(view.details().has_value());
    const tidemark::analysis::AllocationDetails& d = *view.details();
    QCOMPARE(d.row.requested_size, kBatchBytes);
    QVERIFY(d.row.size >= d.row.requested_size);
    QVERIFY(!d.frames.empty());
    QVERIFY(d.tensors.size() >= 2);
    QVERIFY(d.kept_alive_by.has_value());
    const tidemark::analysis::TensorRecord& keeper = d.tensors[*d.kept_alive_by];
    QVERIFY(keeper.is_view());
    // A view (big[0], op "select") of the batch tensor in the same block.
    QCOMPARE(QString::fromStdString(keeper.op), QString("select"));
    bool base_here = false;
    for (const auto& t : d.tensors) base_here |= t.tensor_id == keeper.base_id;
    QVERIFY(base_here);
    const QString html = view.detailsHtml();
    QVERIFY2(html.contains(QString("Kept alive longest by")) && html.contains("view"),
             qPrintable(html));
    QVERIFY(html.contains(QString::number(keeper.tensor_id)));
    QVERIFY(html.contains("requested"));
    QVERIFY(html.contains("lifetime"));
  }

 private slots:
  void initTestCase() {
    const QString path = cli_recorded_trace("view_retention.db", TIDEMARK_VIEW_RETENTION);
    QVERIFY(!path.isEmpty());
    QString error;
    data_ = TraceLoader::load_now(path, &error);
    QVERIFY2(data_, qPrintable(error));
  }

  void clickingABlockInTheAllocatorViewShowsItsDetails() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    view.showView(TraceView::View::allocator);
    AllocatorWidget* a = view.allocator();
    a->resize(1100, a->sizeHint().height());
    // A batch's block, allocated at the peak.
    const AllocatorState& st = a->state();
    QPointF where(-1, -1);
    for (size_t s = 0; s < st.segments.size() && where.x() < 0; ++s)
      for (size_t b = 0; b < st.segments[s].blocks.size(); ++b)
        if (st.segments[s].blocks[b].requested == kBatchBytes) {
          where = a->blockCenter(s, b);
          break;
        }
    QVERIFY2(where.x() >= 0, "no 4 MiB block allocated at the peak");
    QVERIFY(a->blockAt(where) != nullptr);
    QTest::mouseClick(a, Qt::LeftButton, {}, where.toPoint());
    checkBatchDetails(view);
  }

  void doubleClickingALiveRowShowsItsLargestAllocation() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    view.showView(TraceView::View::live);
    // The table over the live model, sorted by bytes: its first row is the batches' site.
    QTableView* table = table_over(view, view.liveModel());
    QVERIFY(table);
    const QModelIndex first = table->model()->index(0, 0);
    QVERIFY(first.isValid());
    QVERIFY(first.data(AllocationRole).toList().size() == 3);
    const QRect r = table->visualRect(first);
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, r.center());
    QTest::mouseDClick(table->viewport(), Qt::LeftButton, {}, r.center());
    checkBatchDetails(view);
  }

  // The Tensors table lists what tensors_live_at() gives at the selected time (the peak); a
  // double-click on a batch tensor shows its sizes, storage block, views and lifetime.
  void doubleClickingATensorShowsItsDetails() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    view.showView(TraceView::View::tensors);
    const uint64_t at = view.allocator()->state().ts;
    const int64_t dev = view.allocator()->state().device_id;
    const auto expected = data_->session->with([&](const tidemark::analysis::Trace& trace) {
      return tidemark::analysis::tensors_live_at(trace, at);
    });
    size_t on_device = 0;
    for (const auto& t : expected) on_device += t.device == dev;
    QCOMPARE(size_t(view.tensorModel()->rowCount()), on_device);
    QTableView* table = table_over(view, view.tensorModel());
    QVERIFY(table);
    // A batch: a 1024x1024 float32 tensor that is not a view.
    QModelIndex batch;
    for (int r = 0; r < table->model()->rowCount() && !batch.isValid(); ++r) {
      const QModelIndex i = table->model()->index(r, 0);
      const auto& row = view.tensorModel()->rows()[size_t(
          qobject_cast<QSortFilterProxyModel*>(table->model())->mapToSource(i).row())];
      if (row.info.sizes == "[1024,1024]" && row.info.base_id == 0) batch = i;
    }
    QVERIFY2(batch.isValid(), "no 1024x1024 batch tensor live at the peak");
    table->scrollTo(batch);
    const QRect r = table->visualRect(batch);
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, r.center());
    QTest::mouseDClick(table->viewport(), Qt::LeftButton, {}, r.center());
    QVERIFY(view.tensorDetails().has_value());
    const tidemark::analysis::TensorDetails& d = *view.tensorDetails();
    QCOMPARE(d.tensor.tensor_id, batch.data(TensorRole).toULongLong());
    QCOMPARE(QString::fromStdString(d.tensor.dtype), QString("float32"));
    QCOMPARE(QString::fromStdString(d.tensor.strides), QString("[1024,1]"));
    QVERIFY(d.allocation.has_value());
    QCOMPARE(d.allocation->row.requested_size, kBatchBytes);
    QCOMPARE(d.storage_nbytes, kBatchBytes);
    // Its views (big[0]) outlive it: the pitfall this sample shows.
    QVERIFY(!d.views.empty());
    for (const auto& v : d.views) QCOMPARE(v.base_id, d.tensor.tensor_id);
    QVERIFY(d.lifetime_ns.has_value());
    QCOMPARE(*d.lifetime_ns, *d.tensor.release_ts - d.tensor.create_ts);
    const QString html = view.detailsHtml();
    for (const char* what : {"strides", "category", "Views of it", "storage", "lifetime"})
      QVERIFY2(html.contains(what), what);
  }

  // The pages observe the view's selection: a time chosen there (as a click on the timeline
  // does) reaches the allocator, the Tensors tab and the flame graph of that time.
  void aTimeSelectedReachesEveryPageThatShowsIt() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    QSignalSpy shown(&view, &TraceView::stateShown);
    const uint64_t t = data_->origin_ns + (data_->end_ns - data_->origin_ns) / 3;
    view.selection()->selectTime(t);
    QCOMPARE(shown.count(), 1);
    QCOMPARE(view.allocator()->state().ts, t);
    QCOMPARE(view.tabTitle(TraceView::View::tensors),
             QString("Tensors (%1 at %2)")
                 .arg(view.tensorModel()->rowCount())
                 .arg(QString::fromStdString(data_->time_text(t - data_->origin_ns))));
    QVERIFY(view.flamePage()->choice()->currentText().contains("the selected time"));
  }
};

QTEST_MAIN(DetailsTest)
#include "details_test.moc"
