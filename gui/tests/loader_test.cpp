// TraceLoader: a real trace loads off the GUI thread and ends in finished(); files that are
// not finalized Tidemark traces of this schema end in failed() naming the file, never a crash.
#include <QSignalSpy>
#include <QTest>
#include <QThread>
#include <chrono>
#include <thread>

#include "gui/models/summary_html.h"
#include "gui/models/table_models.h"
#include "gui/models/trace_loader.h"
#include "gui/pages/timeline_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/memory.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;

class LoaderTest : public QObject {
  Q_OBJECT
 private:
  // Loads `path` and returns the failure message (empty when it succeeded).
  static QString expect_failure(const QString& path) {
    TraceLoader loader;
    QSignalSpy ok(&loader, &TraceLoader::finished);
    QSignalSpy failed(&loader, &TraceLoader::failed);
    loader.load(path);
    if (!failed.wait(60000)) return {};
    if (ok.count() != 0 || failed.count() != 1) return {};
    return failed.at(0).at(0).toString();
  }

 private slots:
  void loadsARecordedTraceWithProgress() {
    const QString path = recorded_trace();
    QVERIFY(!path.isEmpty());
    TraceLoader loader;
    QSignalSpy ok(&loader, &TraceLoader::finished);
    QSignalSpy failed(&loader, &TraceLoader::failed);
    QSignalSpy progress(&loader, &TraceLoader::progress);
    loader.load(path);
    QVERIFY(ok.wait(120000));
    QCOMPARE(failed.count(), 0);
    QVERIFY(progress.count() >= 2);
    QCOMPARE(progress.last().at(0).toInt(), 100);
    auto data = ok.at(0).at(0).value<TraceDataPtr>();
    QVERIFY(data);
    QCOMPARE(QString::fromStdString(data->path), path);
    QVERIFY(!data->devices.empty());
    // The same numbers as the analysis library gives directly.
    auto trace = tidemark::analysis::Trace::open(path.toStdString());
    auto peak = tidemark::analysis::peak(trace, data->devices[0].id);
    QVERIFY(peak && data->peaks[0]);
    QCOMPARE(data->peaks[0]->bytes, peak->bytes);
    QCOMPARE(data->peaks[0]->ts_ns, peak->ts_ns);
    QCOMPARE(data->steps.size(), size_t(20));
    QVERIFY(!data->live_at_peak.empty());
    // The Summary names what made reserved memory grow, as `tidemark summary` does.
    const auto reserved = tidemark::analysis::reserved_at_peak(trace, data->devices[0].id, 10);
    QVERIFY(reserved && !reserved->groups.empty());
    const QString html = summary_html(*data);
    QVERIFY2(html.contains("Reserved at the cpu reserved peak (" + bytes_text(reserved->bytes) +
                           ", by site)"),
             qPrintable(html));
    QVERIFY2(html.contains(QString::fromStdString(reserved->groups[0].label).toHtmlEscaped()),
             qPrintable(html));
    // train_mlp tags no category: no split.
    QVERIFY2(!html.contains("By category"), qPrintable(html));
  }

  // The stages arrive in order: the timeline paints from opened()'s snapshot (painted here
  // in the slot, as a shown view's timeline would next), before the tables and the findings.
  void firstPaintPrecedesTheTablesAndTheFindings() {
    const QString path = recorded_trace();
    TraceLoader loader;
    TimelineWidget timeline;
    timeline.setSynchronous(true);
    timeline.resize(1000, 400);
    QStringList order;
    QSignalSpy opened(&loader, &TraceLoader::opened);
    QSignalSpy tables(&loader, &TraceLoader::tablesReady);
    QSignalSpy done(&loader, &TraceLoader::finished);
    QSignalSpy painted(&timeline, &TimelineWidget::curvesPainted);
    connect(&timeline, &TimelineWidget::curvesPainted, this, [&] { order << "painted"; });
    connect(&loader, &TraceLoader::opened, this, [&](TraceDataPtr d) {
      order << "opened";
      QCOMPARE(int(d->stage), int(Stage::opened));
      QVERIFY(d->live_at_peak.empty() && d->diagnosis.findings.empty());
      timeline.setTraceData(d);
      QImage img(timeline.size(), QImage::Format_RGB32);
      timeline.render(&img);
    });
    connect(&loader, &TraceLoader::tablesReady, this, [&](TraceDataPtr d) {
      order << "tables";
      QCOMPARE(int(d->stage), int(Stage::tables));
      QVERIFY(!d->live_at_peak.empty());
    });
    connect(&loader, &TraceLoader::finished, this, [&](TraceDataPtr d) {
      order << "finished";
      QCOMPARE(int(d->stage), int(Stage::complete));
    });
    loader.load(path);
    QVERIFY(done.wait(120000));
    QCOMPARE(opened.count(), 1);
    QCOMPARE(tables.count(), 1);
    QVERIFY(painted.count() >= 1);
    QCOMPARE(order.first(), QString("opened"));
    QCOMPARE(order.at(1), QString("painted"));
    QVERIFY(order.indexOf("painted") < order.indexOf("tables"));
    QCOMPARE(order.last(), QString("finished"));
    // The peak marker of that first paint is the analysis library's peak.
    auto trace = tidemark::analysis::Trace::open(path.toStdString());
    auto peak = tidemark::analysis::peak(trace, trace.devices().at(0).id);
    QVERIFY(peak && !timeline.peakMarkers().empty());
    QCOMPARE(timeline.peakMarkers().front().ts, peak->ts_ns);
  }

  // A TraceView shows the timeline at opened(), its other views saying "computing…" until
  // their stage arrives.
  void traceViewFillsEachViewAsItsStageArrives() {
    const QString path = recorded_trace();
    TraceView view;
    view.showOffscreen({1200, 800});
    QStringList order;
    QString live_title_at_open, summary_title_at_tables;
    connect(&view, &TraceView::opened, this, [&] {
      order << "opened";
      live_title_at_open = view.tabTitle(TraceView::View::live);
    });
    connect(&view, &TraceView::tablesShown, this, [&] {
      order << "tables";
      summary_title_at_tables = view.tabTitle(TraceView::View::summary);
    });
    QSignalSpy loaded(&view, &TraceView::loaded);
    connect(&view, &TraceView::loaded, this, [&] { order << "loaded"; });
    view.load(path);
    QVERIFY(loaded.wait(120000));
    QCOMPARE(order, QStringList({"opened", "tables", "loaded"}));
    QVERIFY(live_title_at_open.contains("computing"));
    QVERIFY(summary_title_at_tables.contains("computing"));  // the findings came last
    QVERIFY(!view.tabTitle(TraceView::View::summary).contains("computing"));
    QVERIFY(view.liveModel()->rowCount() > 0);
    QTRY_VERIFY_WITH_TIMEOUT(view.timeline()->hasColumns(), 30000);
  }

  void loadingDoesNotBlockTheGuiThread() {
    const QString path = recorded_trace();
    TraceLoader loader;
    QSignalSpy ok(&loader, &TraceLoader::finished);
    loader.load(path);
    QVERIFY(loader.is_running() || ok.count() == 0);  // load() returned before the work ended
    QVERIFY(ok.wait(120000));
  }

  // A second load replaces the first at once: the first says nothing more, not even what it
  // had posted already, so a view never shows the trace it no longer loads.
  void aNewLoadSilencesTheOneBefore() {
    const QString path = recorded_trace();
    TraceLoader loader, reference;
    QSignalSpy opened(&loader, &TraceLoader::opened), done(&loader, &TraceLoader::finished),
        failed(&loader, &TraceLoader::failed), reference_done(&reference, &TraceLoader::finished);
    loader.load(path);
    reference.load(path);  // the same work: when it is done, so is the first load
    // The first load posts what it has meanwhile; none of it is delivered before the next load.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    loader.load(test_dir() + "/does-not-exist.db");
    QVERIFY(failed.wait(10000));
    QTRY_VERIFY_WITH_TIMEOUT(reference_done.count() == 1, 120000);
    QTest::qWait(50);
    QCOMPARE(opened.count(), 0);
    QCOMPARE(done.count(), 0);
    QCOMPARE(failed.count(), 1);
  }

  // A PyTorch snapshot opens as the CLI reads it (Note [Snapshots as traces]): imported into a
  // temporary trace, shown under its own name, with the peaks Python's pickle finds in it
  // (tests/importers/data/snapshot_small_gpu_expected.py).
  void aSnapshotOpensAsItsImport() {
    const QString snapshot = QString(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
    QString error;
    TraceDataPtr data = TraceLoader::load_now(snapshot, &error);
    QVERIFY2(data, qPrintable(error));
    QCOMPARE(QString::fromStdString(data->shown_path()), snapshot);
    QVERIFY(data->path != data->source);
    QVERIFY(data->imported);
    QCOMPARE(data->peaks.at(0)->bytes, int64_t(108275712));
    QVERIFY(summary_html(*data).contains("<h2>" + snapshot + "</h2>"));
    // A damaged one fails naming it.
    QFile in(snapshot);
    QVERIFY(in.open(QIODevice::ReadOnly));
    const QString half = write_file("half.pickle", in.readAll().left(4000));
    QVERIFY(!TraceLoader::load_now(half, &error));
    QVERIFY2(error.contains(half), qPrintable(error));
  }

  void corruptFileFailsNamingIt() {
    const QString path = corrupt_trace(recorded_trace());
    QVERIFY(!path.isEmpty());
    const QString message = expect_failure(path);
    QVERIFY2(message.contains(path), qPrintable(message));
  }

  void textFileFailsNamingIt() {
    const QString path = write_file("notes.txt", "this is not a trace\n");
    const QString message = expect_failure(path);
    QVERIFY2(message.contains(path), qPrintable(message));
  }

  void foreignSqliteFileFailsNamingIt() {
    const QString path = sqlite_file("recipes.db", {}, 0);
    QVERIFY(!path.isEmpty());
    const QString message = expect_failure(path);
    QVERIFY2(message.contains(path), qPrintable(message));
  }

  void newerSchemaFailsNamingIt() {
    const QString path = sqlite_file("newer.db", recorded_trace(), 999);
    QVERIFY(!path.isEmpty());
    const QString message = expect_failure(path);
    QVERIFY2(message.contains(path), qPrintable(message));
    QVERIFY2(message.contains("999") || message.contains("version"), qPrintable(message));
  }

  void missingFileFailsNamingIt() {
    const QString path = test_dir() + "/does-not-exist.db";
    const QString message = expect_failure(path);
    QVERIFY2(message.contains(path), qPrintable(message));
  }

  void loadNowReportsTheSameError() {
    QString error;
    QVERIFY(!TraceLoader::load_now(write_file("junk.db", QByteArray(4096, 'x')), &error));
    QVERIFY2(error.contains("junk.db"), qPrintable(error));
  }
};

QTEST_MAIN(LoaderTest)
#include "loader_test.moc"
