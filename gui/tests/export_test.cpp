// File > Export (TraceView::exportTo): the recorded train_mlp trace written as a PyTorch memory
// snapshot, Chrome trace JSON and CSV, each the same bytes `tidemark export` writes; a path
// that cannot be written fails with a message naming it and leaves nothing behind; an existing
// file survives a failed export; the trace itself is never the target.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTest>

#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;

namespace {

QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class ExportTest : public QObject {
  Q_OBJECT
  TraceDataPtr data_;
  QString trace_;

  // Exports through the view (in the thread pool, as the menu does); returns the signal's
  // arguments.
  std::pair<bool, QString> exportTo(const QString& out, TraceView::ExportFormat format) {
    TraceView view;
    view.setTraceData(data_);
    QSignalSpy done(&view, &TraceView::exported);
    view.exportTo(out, format);
    if (done.isEmpty() && !done.wait(60000)) return {false, "no exported() signal"};
    return {done.at(0).at(0).toBool(), done.at(0).at(1).toString()};
  }

 private slots:
  void initTestCase() {
    trace_ = recorded_trace();
    QVERIFY(!trace_.isEmpty());
    QString error;
    data_ = TraceLoader::load_now(trace_, &error);
    QVERIFY2(data_, qPrintable(error));
  }

  void eachFormatIsWhatTheCliWrites() {
    const std::pair<TraceView::ExportFormat, QString> formats[] = {
        {TraceView::ExportFormat::snapshot, "snapshot"},
        {TraceView::ExportFormat::chrome, "chrome"},
        {TraceView::ExportFormat::csv, "csv"}};
    for (const auto& [format, name] : formats) {
      const QString out = test_dir() + "/gui." + name;
      const QString cli = test_dir() + "/cli." + name;
      QFile::remove(out);
      auto [ok, message] = exportTo(out, format);
      QVERIFY2(ok, qPrintable(message));
      QVERIFY2(message.contains(out), qPrintable(message));
      QVERIFY(QDir(test_dir()).entryList({"*.part*"}).isEmpty());
      QProcess p;
      p.start(TIDEMARK_CLI, {"export", trace_, "--format", name, "-o", cli});
      QVERIFY(p.waitForFinished(60000));
      QCOMPARE(p.exitCode(), 0);
      const QByteArray bytes = read_all(out);
      QVERIFY(bytes.size() > 100);
      QVERIFY2(bytes == read_all(cli), qPrintable(name));
    }
    QVERIFY(read_all(test_dir() + "/gui.snapshot").startsWith(QByteArray("\x80\x04", 2)));
  }

  void aFailedExportNamesThePathAndKeepsWhatWasThere() {
    auto [ok, message] = exportTo("/nonexistent-dir/run.pickle", TraceView::ExportFormat::snapshot);
    QVERIFY(!ok);
    QVERIFY2(message.contains("/nonexistent-dir/run.pickle"), qPrintable(message));
    // A directory cannot be replaced by the export: it stays, and no temporary is left.
    const QString dir = test_dir() + "/taken";
    QDir().mkpath(dir + "/inside");
    auto [ok2, message2] = exportTo(dir, TraceView::ExportFormat::csv);
    QVERIFY(!ok2);
    QVERIFY2(message2.contains(dir), qPrintable(message2));
    QVERIFY(QDir(dir + "/inside").exists());
    QVERIFY(QDir(test_dir()).entryList({"*.part*"}).isEmpty());

    // A file that was there survives an export that fails (its trace is gone by then).
    const QString kept = test_dir() + "/kept.csv";
    {
      QFile f(kept);
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write("keep me\n");
    }
    const QString copy = test_dir() + "/vanishing.db";
    QFile::remove(copy);
    QVERIFY(QFile::copy(trace_, copy));
    QString error;
    TraceDataPtr vanishing = TraceLoader::load_now(copy, &error);
    QVERIFY2(vanishing, qPrintable(error));
    QVERIFY(QFile::remove(copy));
    {
      TraceView view;
      view.setTraceData(vanishing);
      QSignalSpy done(&view, &TraceView::exported);
      view.exportTo(kept, TraceView::ExportFormat::csv);
      QVERIFY(!done.isEmpty() || done.wait(60000));
      QVERIFY(!done.at(0).at(0).toBool());
    }
    QCOMPARE(read_all(kept), QByteArray("keep me\n"));
    QVERIFY(QDir(test_dir()).entryList({"*.part*"}).isEmpty());

    // Nor does an export replace the trace it is of.
    auto [ok3, message3] = exportTo(trace_, TraceView::ExportFormat::snapshot);
    QVERIFY(!ok3);
    QVERIFY2(message3.contains("the output is the input itself"), qPrintable(message3));
    QVERIFY(TraceLoader::load_now(trace_, &error));
  }
};

QTEST_MAIN(ExportTest)
#include "export_test.moc"
