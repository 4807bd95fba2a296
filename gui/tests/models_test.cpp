// The table models under QAbstractItemModelTester (empty, filled, reset), and sorting through
// the proxy by the raw numbers behind the formatted cells.
#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QTest>

#include "gui/models/table_models.h"
#include "gui/models/trace_loader.h"
#include "gui/tests/test_traces.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;

class ModelsTest : public QObject {
  Q_OBJECT
  TraceDataPtr data_;

  template <class Model, class Rows>
  void exercise(Model* model, const Rows& rows) {
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model->rowCount(), 0);
    model->setRows(rows);
    QCOMPARE(model->rowCount(), int(rows.size()));
    QSortFilterProxyModel proxy;
    QAbstractItemModelTester proxy_tester(&proxy,
                                          QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(model);
    proxy.setSortRole(SortRole);
    for (int c = 0; c < model->columnCount(); ++c) proxy.sort(c, Qt::DescendingOrder);
    model->setRows({});
    QCOMPARE(proxy.rowCount(), 0);
    model->setRows(rows);
  }

 private slots:
  void initTestCase() {
    QString error;
    data_ = TraceLoader::load_now(recorded_trace(), &error);
    QVERIFY2(data_, qPrintable(error));
  }

  void siteModel() {
    std::unique_ptr<SiteModel> m(make_site_model(nullptr));
    QVERIFY(!data_->live_at_peak.empty());
    exercise(m.get(), data_->live_at_peak);
    // The live-at-peak rows add up to the peak, and every span covers the peak's time.
    int64_t total = 0;
    for (const SiteRow& r : data_->live_at_peak) {
      total += r.bytes;
      QVERIFY(r.first_ts <= data_->peaks[0]->ts_ns && r.last_ts >= data_->peaks[0]->ts_ns);
    }
    QCOMPARE(total, data_->peaks[0]->bytes);
  }

  void sortsByBytesNotByText() {
    std::unique_ptr<SiteModel> m(make_site_model(nullptr));
    std::vector<SiteRow> rows(3);
    rows[0].site = "a";
    rows[0].bytes = 900;  // "900 B" sorts after "2.00 MiB" as text
    rows[1].site = "b";
    rows[1].bytes = 2 << 20;
    rows[2].site = "c";
    rows[2].bytes = 5000;
    m->setRows(rows);
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(m.get());
    proxy.setSortRole(SortRole);
    proxy.sort(1, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, 0).data().toString(), QString("b"));
    QCOMPARE(proxy.index(1, 0).data().toString(), QString("c"));
    QCOMPARE(proxy.index(2, 0).data().toString(), QString("a"));
    proxy.setFilterKeyColumn(-1);
    proxy.setFilterFixedString("c");
    QCOMPARE(proxy.rowCount(), 1);
  }

  void leakModel() {
    std::unique_ptr<SiteModel> m(make_site_model(nullptr));
    exercise(m.get(), data_->leaks);
  }

  void syncModel() {
    std::unique_ptr<SyncSiteModel> m(make_sync_model(nullptr));
    exercise(m.get(), data_->sync_sites);
  }

  void stepModelHighlightsTheStep() {
    std::unique_ptr<StepModel> m(make_step_model(data_->origin_ns, nullptr));
    exercise(m.get(), data_->step_rows);
    QVERIFY(m->rowCount() >= 20);
    const QModelIndex i = m->index(3, 0);
    const auto& s = data_->step_rows[3].stats;
    QCOMPARE(i.data(FromTsRole).toULongLong(), data_->origin_ns + s.start_ns);
    QCOMPARE(i.data(ToTsRole).toULongLong(), data_->origin_ns + s.start_ns + s.duration_ns);
  }
};

QTEST_MAIN(ModelsTest)
#include "models_test.moc"
