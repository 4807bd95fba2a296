// `tidemark-gui --screenshot`: writes a non-blank PNG of each view and exits 0; a bad file
// exits 2 with one line naming it; so does an output that is the trace, which is kept.
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QTest>

#include "gui/tests/test_traces.h"

using namespace tidemark::gui::testing;

class ScreenshotTest : public QObject {
  Q_OBJECT
 private slots:
  void writesANonBlankImageOfEachView_data() {
    QTest::addColumn<QString>("view");
    QTest::newRow("timeline") << "timeline";
    QTest::newRow("allocator") << "allocator";
    QTest::newRow("summary") << "summary";
    QTest::newRow("flame") << "flame";
  }
  void writesANonBlankImageOfEachView() {
    QFETCH(QString, view);
    const QString trace = recorded_trace();
    QVERIFY(!trace.isEmpty());
    const QString out = test_dir() + "/" + view + ".png";
    QFile::remove(out);
    QProcess p;
    p.start(TIDEMARK_GUI_EXE, {"--screenshot", out, "--view", view, trace});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QImage img(out);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 800 && img.height() >= 600);
    QSet<QRgb> colors;
    for (int y = 0; y < img.height(); y += 3)
      for (int x = 0; x < img.width(); x += 3) colors.insert(img.pixel(x, y));
    QVERIFY2(colors.size() > 8, qPrintable(QString::number(colors.size())));
  }

  void badFileExitsTwoWithOneLine() {
    const QString bad = write_file("bad.db", "not a trace");
    QProcess p;
    p.start(TIDEMARK_GUI_EXE, {"--screenshot", test_dir() + "/bad.png", bad});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    const QString err = QString::fromUtf8(p.readAllStandardError()).trimmed();
    QVERIFY2(err.contains(bad) && !err.contains('\n'), qPrintable(err));
    QVERIFY(!QFile::exists(test_dir() + "/bad.png"));
  }

  // Bug: `--screenshot shot.png t.db`, shot.png a link to t.db, wrote the image over the trace.
  void theTraceItselfIsRefusedAndKept() {
    const QString trace = recorded_trace();
    QVERIFY(!trace.isEmpty());
    QFile f(trace);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray before = f.readAll();
    f.close();
    const QString link = test_dir() + "/shot-link.png";
    QFile::remove(link);
    QVERIFY(QFile::link(trace, link));
    QProcess p;
    p.start(TIDEMARK_GUI_EXE, {"--screenshot", link, trace});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    const QString err = QString::fromUtf8(p.readAllStandardError()).trimmed();
    QVERIFY2(err.contains(trace) && err.contains("the output is the input") && !err.contains('\n'),
             qPrintable(err));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll() == before);
  }
};

QTEST_MAIN(ScreenshotTest)
#include "screenshot_test.moc"
