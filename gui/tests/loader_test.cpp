// TraceLoader: a real trace loads off the GUI thread and ends in finished(); files that are
// not finalized Tidemark traces of this schema end in failed() naming the file, never a crash.
#include <QSignalSpy>
#include <QTest>
#include <QThread>

#include "gui/core/trace_loader.h"
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
  }

  void loadingDoesNotBlockTheGuiThread() {
    const QString path = recorded_trace();
    TraceLoader loader;
    QSignalSpy ok(&loader, &TraceLoader::finished);
    loader.load(path);
    QVERIFY(loader.is_running() || ok.count() == 0);  // load() returned before the work ended
    QVERIFY(ok.wait(120000));
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
