// Compare: samples/pitfalls/accumulated_loss (A: the loss sum keeps every step's graph alive)
// against its --fixed run (B). The overlaid curves are B's own timeline shifted by the
// alignment, the differences listed are analysis::diff's (what `tidemark diff` prints), and
// `tidemark-gui --screenshot --compare A B` renders them.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QImage>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>

#include "gui/pages/flame_widget.h"
#include "gui/pages/timeline_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/diff.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace an = tidemark::analysis;

class CompareTest : public QObject {
  Q_OBJECT
  QString a_, b_;
  TraceDataPtr data_;

 private slots:
  void initTestCase() {
    a_ = cli_recorded_trace("loss.db", TIDEMARK_ACCUMULATED_LOSS, {"--steps", "10"});
    b_ = cli_recorded_trace("loss_fixed.db", TIDEMARK_ACCUMULATED_LOSS,
                            {"--steps", "10", "--fixed"});
    QVERIFY(!a_.isEmpty() && !b_.isEmpty());
    QString error;
    data_ = TraceLoader::load_now(a_, &error);
    QVERIFY2(data_, qPrintable(error));
  }

  // Live in selection and Compare become tabs when first used, in either order; each is found
  // by what it is, not by where it came.
  void tabsMadeOnFirstUseAreFoundByWhatTheyAre() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    QCOMPARE(view.tabTitle(TraceView::View::compare), QString());  // no tab yet
    view.selectRange(data_->origin_ns, data_->end_ns);
    view.compareWith(b_);
    QVERIFY(view.tabTitle(TraceView::View::selection).startsWith("Live in selection ("));
    QCOMPARE(view.tabTitle(TraceView::View::compare), QString("Compare"));
    auto* tabs = view.findChild<QTabWidget*>();
    view.showView(TraceView::View::compare);
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QString("Compare"));
    view.showView(TraceView::View::selection);
    QVERIFY(tabs->tabText(tabs->currentIndex()).startsWith("Live in selection ("));
  }

  void theOtherTraceIsOverlaidAndItsDifferencesListed() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    QAbstractItemModelTester tester(view.diffModel(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy shown(&view, &TraceView::compareShown);
    QSignalSpy listed(&view, &TraceView::differencesShown);
    view.flamePage()->flame()->zoomTo({0});  // a zoom in the peak's graph outlives the Compare
    view.compareWith(b_);
    QCOMPARE(view.flamePage()->flame()->zoomed(), FlameWidget::Path{0});
    QCOMPARE(shown.count(), 1);
    QCOMPARE(listed.count(), 1);
    // Compare's results are the view's, in its selection: the compared trace and one pair of
    // differential graphs per device of both.
    QVERIFY(view.selection()->compared());
    QCOMPARE(QString::fromStdString(view.selection()->compared()->path), b_);

    const an::Trace ta = an::Trace::open(a_.toStdString()), tb = an::Trace::open(b_.toStdString());
    const an::TraceDiff diff = an::diff(ta, tb);
    const std::vector<DiffRow> expected = diff_rows(diff);
    QCOMPARE(view.diffModel()->rows().size(), expected.size());
    // The first row: the devices' allocated peaks, as analysis::peak gives them.
    const DiffRow& peak = view.diffModel()->rows().front();
    QCOMPARE(QString::fromStdString(peak.what), QString("peak allocated"));
    const int64_t dev_a = ta.devices()[0].id, dev_b = tb.device(ta.devices()[0].name).id;
    QCOMPARE(peak.a, an::peak(ta, dev_a)->bytes);
    QCOMPARE(peak.b, an::peak(tb, dev_b)->bytes);
    size_t matched = 0;
    for (const an::DeviceMatch& m : an::match_devices(ta, tb)) matched += m.a && m.b;
    QCOMPARE(view.selection()->flameDiffs().size(), matched);
    QCOMPARE(view.selection()->flameDiffs().front().device, ta.devices()[0].name);
    QVERIFY2(peak.delta() < 0, "the fixed run should peak lower");
    // The site holding the graphs shrank or vanished.
    bool site_shrank = false;
    for (const DiffRow& r : view.diffModel()->rows())
      site_shrank |= r.what.rfind("site", 0) == 0 && r.delta() < 0;
    QVERIFY(site_shrank);
    // What kind of memory: the activations the accumulated loss kept are gone in the fix.
    bool activations_shrank = false;
    for (const DiffRow& r : view.diffModel()->rows())
      activations_shrank |=
          r.what.rfind("category", 0) == 0 && r.name == "activation" && r.delta() < 0;
    QVERIFY(activations_shrank);

    // The Flame graph tab offers the differential graphs: B's peak stacks with A's as the base
    // (what grew), and A's with B's (what shrank).
    FlamePage* page = view.flamePage();
    int grown = -1, shrunk = -1;
    for (int i = 0; i < page->choice()->count(); ++i) {
      if (page->choice()->itemText(i).contains("(red: grew)")) grown = i;
      if (page->choice()->itemText(i).contains("(blue: shrank)")) shrunk = i;
    }
    QVERIFY(grown >= 0 && shrunk >= 0);
    page->choice()->setCurrentIndex(grown);
    QCOMPARE(page->flame()->tree().bytes, peak.b);
    QCOMPARE(page->flame()->tree().base_bytes, peak.a);
    QVERIFY(page->flame()->tooltipFor({}).contains(
        QString("this trace %1, the compared one %2").arg(bytes_text(peak.a), bytes_text(peak.b))));
    page->choice()->setCurrentIndex(shrunk);
    QCOMPARE(page->flame()->tree().bytes, peak.a);
    QCOMPARE(page->flame()->tree().base_bytes, peak.b);
    QVERIFY(page->flame()->tooltipFor({}).contains(
        QString("this trace %1, the compared one %2").arg(bytes_text(peak.a), bytes_text(peak.b))));

    // The overlay: B's timeline over A's columns shifted to B's time (aligned at the start).
    TimelineWidget* t = view.timeline();
    QCOMPARE(t->compareOffset(), int64_t(tb.origin_ns()) - int64_t(ta.origin_ns()));
    QImage img(t->size(), QImage::Format_RGB32);
    t->render(&img);
    QCOMPARE(t->compareColumns().size(), data_->devices.size());
    const an::Timeline& drawn = t->compareColumns()[0];
    const an::Timeline own =
        an::timeline(tb, dev_b,
                     {t->viewFrom() + t->compareOffset(), t->viewTo() + t->compareOffset(),
                      size_t(t->plotRect().width())});
    QCOMPARE(drawn.allocated.last, own.allocated.last);
    // The whole of B is in view (the range covers the longer trace): its peak is drawn.
    QCOMPARE(*std::max_element(drawn.allocated.max.begin(), drawn.allocated.max.end()),
             an::peak(tb, dev_b)->bytes);
    QVERIFY(t->yMaxBytes() > an::peak(tb, dev_b)->bytes);

    // Aligned at the first step: the offset is between the two first steps.
    view.setCompareAlign(TimelineWidget::Align::first_step);
    QCOMPARE(t->compareOffset(), int64_t(an::step_starts(tb).front().second) -
                                     int64_t(an::step_starts(ta).front().second));
  }

  void screenshotOfACompare() {
    const QString out = test_dir() + "/compare.png";
    QFile::remove(out);
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(TIDEMARK_GUI_EXE, {"--screenshot", out, "--compare", a_, b_});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAll().constData());
    QImage img(out);
    QVERIFY(!img.isNull());
    QSet<QRgb> colors;
    for (int y = 0; y < img.height(); y += 7)
      for (int x = 0; x < img.width(); x += 7) colors.insert(img.pixel(x, y));
    QVERIFY(colors.size() > 10);
    // A missing B is one line naming it, exit 2.
    p.start(TIDEMARK_GUI_EXE, {"--screenshot", out, "--compare", a_, a_ + ".missing"});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(p.readAll().contains(".missing"));
  }
};

QTEST_MAIN(CompareTest)
#include "compare_test.moc"
