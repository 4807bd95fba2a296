// TimelineWidget rendering a recorded trace into a QImage: the highest drawn allocated pixel
// lies at the peak value's y, the peak marker sits at analysis::peak()'s time, zooming keeps
// the time under the cursor, and the allocator state at the peak adds up to the peak.
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QSet>
#include <QSignalSpy>
#include <QTest>
#include <QWheelEvent>

#include "gui/models/trace_loader.h"
#include "gui/pages/allocator_widget.h"
#include "gui/pages/timeline_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/merge.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;

class TimelineTest : public QObject {
  Q_OBJECT
  TraceDataPtr data_;
  std::optional<tidemark::store::Peak> peak_;

  static QImage render(QWidget& w) {
    QImage img(w.size(), QImage::Format_RGB32);
    w.render(&img);
    return img;
  }
  // The smallest y of a pixel of exactly `color` inside `r`; -1 when none.
  static int topmost(const QImage& img, const QRect& r, QColor color) {
    for (int y = r.top(); y <= r.bottom(); ++y)
      for (int x = r.left(); x <= r.right(); ++x)
        if (img.pixelColor(x, y) == color) return y;
    return -1;
  }

 private slots:
  void initTestCase() {
    const QString path = recorded_trace();
    QString error;
    data_ = TraceLoader::load_now(path, &error);
    QVERIFY2(data_, qPrintable(error));
    auto trace = tidemark::analysis::Trace::open(path.toStdString());
    peak_ = tidemark::analysis::peak(trace, data_->devices[0].id);
    QVERIFY(peak_);
  }

  void highestAllocatedPixelIsThePeak() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1000, 400);
    w.setTraceData(data_);
    const QImage img = render(w);
    const QRect plot = w.plotRect();
    const int y = topmost(img, plot, TimelineWidget::allocatedColor(0));
    QVERIFY(y >= 0);
    QVERIFY2(std::abs(y - w.valueToY(peak_->bytes)) <= 1,
             qPrintable(QString("drawn %1, peak at %2").arg(y).arg(w.valueToY(peak_->bytes))));
    // The peak is not clipped: the y range holds it with headroom.
    QVERIFY(w.yMaxBytes() > peak_->bytes);
  }

  void peakMarkerIsAtTheAnalysisPeak() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1000, 400);
    w.setTraceData(data_);
    render(w);
    QCOMPARE(w.peakMarkers().size(), size_t(1));
    const auto& m = w.peakMarkers()[0];
    QCOMPARE(m.ts, peak_->ts_ns);
    QCOMPARE(m.bytes, peak_->bytes);
    QCOMPARE(m.pos.y(), w.valueToY(peak_->bytes));
    QVERIFY(std::abs(m.pos.x() - w.tsToX(peak_->ts_ns)) <= 1);
  }

  void zoomedInAroundThePeakTheCurveStillReachesIt() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(800, 300);
    w.setTraceData(data_);
    for (int i = 0; i < 6; ++i) w.zoomAround(peak_->ts_ns, 0.5);
    QVERIFY(w.viewTo() - w.viewFrom() < (data_->end_ns - data_->origin_ns) / 32);
    QVERIFY(w.viewFrom() <= peak_->ts_ns && peak_->ts_ns < w.viewTo());
    const QImage img = render(w);
    const int y = topmost(img, w.plotRect(), TimelineWidget::allocatedColor(0));
    QVERIFY(std::abs(y - w.valueToY(peak_->bytes)) <= 1);
  }

  void wheelZoomKeepsTheTimeUnderTheCursor() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(800, 300);
    w.setTraceData(data_);
    const QPointF at(w.plotRect().left() + 300, w.plotRect().center().y());
    const uint64_t before = w.xToTs(at.x());
    QWheelEvent wheel(at, w.mapToGlobal(at), {}, QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &wheel);
    const uint64_t span = w.viewTo() - w.viewFrom();
    QVERIFY(span < data_->end_ns + 1 - data_->origin_ns);
    QVERIFY(std::llabs(int64_t(w.xToTs(at.x())) - int64_t(before)) <= int64_t(span / 400 + 1));
    QTest::keyClick(&w, Qt::Key_0);
    QCOMPARE(w.viewFrom(), data_->origin_ns);
  }

  void clickSelectsATime() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(800, 300);
    w.setTraceData(data_);
    QSignalSpy spy(&w, &TimelineWidget::timeSelected);
    const QPoint at(w.plotRect().left() + 200, w.plotRect().center().y());
    QTest::mouseClick(&w, Qt::LeftButton, {}, at);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toULongLong(), quint64(w.xToTs(at.x())));
  }

  void frameTimesWhileZooming() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1600, 500);
    w.setTraceData(data_);
    QImage img(w.size(), QImage::Format_RGB32);
    double worst = 0;
    for (int i = 0; i < 20; ++i) {
      QElapsedTimer t;
      t.start();
      w.zoomAround(peak_->ts_ns, i < 10 ? 0.7 : 1 / 0.7);
      w.render(&img);
      worst = std::max(worst, double(t.nsecsElapsed()) / 1e6);
    }
    qInfo("worst zoom frame (query + paint) at 1600 px: %.2f ms", worst);
  }

  // The scope lane: the module paths the sample's tl::nn modules push (model.forward, ...)
  // drawn as boxes under the curves, each at its time, with a tooltip naming its path.
  void scopeLaneDrawsTheRecordedScopes() {
    QVERIFY(!data_->scopes.empty());
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1600, 500);
    w.setTraceData(data_);
    const QImage img = render(w);
    QVERIFY(w.scopeRows() >= 1);
    const QRect lane = w.scopeLaneRect();
    QVERIFY(lane.top() > w.plotRect().bottom());
    QVERIFY(w.syncLaneRect().top() > lane.bottom());
    // Scopes narrower than a pixel that share a pixel with one already drawn are thinned out,
    // so only paths with a span at least a pixel wide must appear.
    QSet<QString> drawn, recorded;
    for (const auto& s : data_->scopes) {
      const double width = w.tsToX(s.pop_ts.value_or(data_->end_ns)) - w.tsToX(s.push_ts);
      if (s.depth == 0 && width >= 1) recorded.insert(QString::fromStdString(s.path));
    }
    bool module_path = false;
    for (const TimelineWidget::DrawnScope& d : w.drawnScopes()) {
      const auto& s = data_->scopes[d.index];
      const QString path = QString::fromStdString(s.path);
      drawn.insert(path);
      module_path |= path.startsWith("model");
      QVERIFY(lane.adjusted(0, 0, 1, 1).contains(d.rect.toRect()));
      QVERIFY(std::abs(d.rect.top() - (lane.top() + s.depth * (lane.height() / w.scopeRows()))) <=
              1);
      QVERIFY(std::abs(d.rect.left() - std::max(w.tsToX(s.push_ts), double(lane.left()))) <= 1);
    }
    for (const QString& r : recorded) QVERIFY2(drawn.contains(r), qPrintable(r));
    QVERIFY2(module_path, qPrintable(QStringList(drawn.values()).join(", ")));
    // The box is painted, and its tooltip names the path.
    const TimelineWidget::DrawnScope& first = w.drawnScopes().front();
    QVERIFY(img.pixelColor(first.rect.center().toPoint()) != QColor(Qt::white));
    const QString tip = w.scopeTooltip(first.rect.center().toPoint());
    QVERIFY2(tip.contains(QString::fromStdString(data_->scopes[first.index].path).toHtmlEscaped()),
             qPrintable(tip));
    qInfo("scopes drawn: %s", qPrintable(QStringList(drawn.values()).join(", ")));
  }

  // The timeline's zoom is the view's: the selection follows a zoom, and a range set
  // on the selection is what the timeline shows.
  void theZoomIsSharedWithTheViewsSelection() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    TimelineWidget* t = view.timeline();
    t->zoomAround(t->viewFrom() + (t->viewTo() - t->viewFrom()) / 2, 0.25);
    QVERIFY(view.selection()->zoom() == (Span{t->viewFrom(), t->viewTo()}));
    const Span half{t->viewFrom(), t->viewFrom() + (t->viewTo() - t->viewFrom()) / 2};
    view.selection()->setZoom(half.first, half.second);
    QCOMPARE(t->viewFrom(), half.first);
    QCOMPARE(t->viewTo(), half.second);
  }

  // Shift+drag selects a range; the Live in selection tab lists what was allocated in it, by
  // site: its bytes add up to an independent SQL sum over the allocations table.
  void shiftDragListsWhatWasLiveInTheSelection() {
    TraceView view;
    view.showOffscreen({1200, 800}, data_);
    TimelineWidget* t = view.timeline();
    QSignalSpy range(t, &TimelineWidget::rangeSelected);
    QSignalSpy shown(&view, &TraceView::selectionShown);
    const QRect plot = t->plotRect();
    const QPoint a(plot.left() + plot.width() / 3, plot.center().y());
    const QPoint b(plot.left() + plot.width() / 2, plot.center().y());
    QTest::mousePress(t, Qt::LeftButton, Qt::ShiftModifier, a);
    QTest::mouseMove(t, b);
    QTest::mouseRelease(t, Qt::LeftButton, Qt::ShiftModifier, b);
    QCOMPARE(range.count(), 1);
    QCOMPARE(shown.count(), 1);
    const quint64 from = range.first().at(0).toULongLong(), to = range.first().at(1).toULongLong();
    QVERIFY(from < to);
    int64_t listed = 0;
    uint64_t count = 0;
    for (const SiteRow& r : view.selectionModel()->rows()) {
      listed += r.bytes;
      count += r.count;
    }
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(data_->path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT COUNT(*), TOTAL(size) FROM allocations WHERE alloc_ts < ? AND "
                       "(free_requested_ts IS NULL OR free_requested_ts > ?)",
                       -1, &st, nullptr);
    sqlite3_bind_int64(st, 1, int64_t(to));
    sqlite3_bind_int64(st, 2, int64_t(from));
    QCOMPARE(sqlite3_step(st), SQLITE_ROW);
    const uint64_t expected_count = uint64_t(sqlite3_column_int64(st, 0));
    const int64_t expected_bytes = int64_t(sqlite3_column_double(st, 1));
    sqlite3_finalize(st);
    sqlite3_close(db);
    QVERIFY(expected_count > 0);
    QCOMPARE(count, expected_count);
    QCOMPARE(listed, expected_bytes);
  }

  void allocatorStateAtThePeakHoldsThePeak() {
    AllocatorState st = data_->session->with([&](const tidemark::analysis::Trace& trace) {
      return allocator_state(trace, data_->devices[0].id, peak_->ts_ns);
    });
    QVERIFY(!st.segments.empty());
    int64_t allocated = 0;
    for (const SegmentState& s : st.segments)
      for (const BlockState& b : s.blocks) {
        QVERIFY(b.addr >= s.addr && b.addr + b.size <= s.addr + s.size);
        if (!b.pending_free) allocated += int64_t(b.size);
      }
    QCOMPARE(allocated, peak_->bytes);
    AllocatorWidget w;
    w.resize(900, 300);
    w.setState(st);
    const QImage img = render(w);
    QVERIFY(topmost(img, img.rect(), AllocatorWidget::allocatedColor()) >= 0);
  }

  // Note [Rank lanes]: a merged trace of two ranks (train_mlp recorded as ranks 0 and 1 of a
  // job, 20 and 5 steps, then `merge`d) is drawn in two lanes, rank 0 above rank 1, on one
  // byte scale: each rank's peak marker and highest allocated pixel are at its own peak's
  // value in its own lane.
  void mergedRanksAreDrawnInLanes() {
    QStringList ranks;
    for (int r = 0; r < 2; ++r) {
      const QString path = test_dir() + QString("/ranked_%1.db").arg(r);
      for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
      QProcess p;
      p.setProcessChannelMode(QProcess::MergedChannels);
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("TIDEMARK_OUTPUT", test_dir() + "/ranked_%r.db");
      env.insert("OMPI_COMM_WORLD_RANK", QString::number(r));
      env.insert("OMPI_COMM_WORLD_SIZE", "2");
      p.setProcessEnvironment(env);
      p.start(TIDEMARK_TRAIN_MLP, {r == 0 ? "20" : "5"});
      QVERIFY2(p.waitForFinished(300000) && p.exitCode() == 0 && QFile::exists(path),
               p.readAll().constData());
      ranks << path;
    }
    const QString merged = test_dir() + "/ranked_merged.db";
    QFile::remove(merged);
    tidemark::analysis::merge_ranks({ranks[0].toStdString(), ranks[1].toStdString()},
                                    merged.toStdString());
    QString error;
    TraceDataPtr data = TraceLoader::load_now(merged, &error);
    QVERIFY2(data, qPrintable(error));
    QCOMPARE(int(data->devices.size()), 2);

    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1000, 500);
    w.setTraceData(data);
    const QImage img = render(w);
    QCOMPARE(w.laneCount(), 2);
    QVERIFY(w.laneRect(0).bottom() < w.laneRect(1).top());
    QVERIFY(w.plotRect().contains(w.laneRect(0)) && w.plotRect().contains(w.laneRect(1)));
    QCOMPARE(w.laneLabel(1), QString("rank 1"));
    // Each lane draws its own rank's step lines: 20 in rank 0's, 5 in rank 1's.
    QCOMPARE(int(w.laneSteps(0).size()), 20);
    QCOMPARE(int(w.laneSteps(1).size()), 5);
    QCOMPARE(int(data->steps.size()), 25);
    auto trace = tidemark::analysis::Trace::open(merged.toStdString());
    QCOMPARE(int(w.peakMarkers().size()), 2);
    for (size_t d = 0; d < 2; ++d) {
      const int lane = w.laneOf(d);
      QCOMPARE(lane, int(*data->devices[d].rank));
      const auto peak = tidemark::analysis::peak(trace, data->devices[d].id);
      QVERIFY(peak);
      const TimelineWidget::PeakMarker& m = w.peakMarkers()[d];
      QCOMPARE(m.device, data->devices[d].name);
      QVERIFY(w.laneRect(lane).contains(m.pos));
      QCOMPARE(m.pos.y(), w.valueToY(peak->bytes, lane));
      // By RGB value: the other devices' colours are given as HSV (QColor's == compares specs).
      int y = -1;
      const QRect r = w.laneRect(lane);
      const QRgb want = TimelineWidget::allocatedColor(d).rgb();
      for (int yy = r.top(); yy <= r.bottom() && y < 0; ++yy)
        for (int x = r.left(); x <= r.right(); ++x)
          if (img.pixel(x, yy) == want) {
            y = yy;
            break;
          }
      QVERIFY2(std::abs(y - w.valueToY(peak->bytes, lane)) <= 1,
               qPrintable(QString("lane %1: drawn %2, peak at %3")
                              .arg(lane)
                              .arg(y)
                              .arg(w.valueToY(peak->bytes, lane))));
    }
    // Any other trace is one lane, the whole plot.
    w.setTraceData(data_);
    QCOMPARE(w.laneCount(), 1);
    QCOMPARE(w.laneRect(0), w.plotRect());
  }
};

QTEST_MAIN(TimelineTest)
#include "timeline_test.moc"
