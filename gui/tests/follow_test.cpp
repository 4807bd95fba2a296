// Follow: a trace still being recorded grows on screen. The test writes events into a trace
// with TraceWriter (as the recorder does: WAL, commits) while a TraceView follows it, and checks
// that each commit reaches the view -- its end time and the timeline's range grow, the peak is
// the bytes the test allocated -- and that once the trace is finalized the view loads it fully.
#include <QSignalSpy>
#include <QTest>

#include "gui/models/summary_html.h"
#include "gui/pages/timeline_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/memory.h"
#include "profiler/store/trace_writer.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace ev = tidemark::events;
namespace st = tidemark::store;

class FollowTest : public QObject {
  Q_OBJECT
  std::unique_ptr<st::TraceWriter> writer_;
  uint64_t seq_ = 0;

  // A step event (the recorder's tl::profiler::step(), or an NVTX step range).
  void step(uint64_t k, uint64_t ts, ev::DeviceId device = {}) {
    ev::Event e;
    e.kind = ev::Kind::step;
    e.ts_ns = ts;
    e.thread_id = 1;
    e.seq = ++seq_;
    e.device = device;
    e.name = {"step", k};
    writer_->append(e, 0);
  }

  void block(ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t size) {
    ev::Event e;
    e.kind = kind;
    e.ts_ns = ts;
    e.thread_id = 1;
    e.seq = ++seq_;
    e.block.addr = addr;
    e.block.size = e.block.requested_size = size;
    e.block.segment = 0x100000;
    writer_->append(e, 0);
  }

 private slots:
  void aTraceBeingWrittenGrowsOnScreen() {
    const QString path = test_dir() + "/growing.db";
    for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
    st::TraceMeta meta;
    meta.start_ts_ns = 1'000'000;
    meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", 0});
    writer_ = st::TraceWriter::create(path.toStdString(), meta);
    block(ev::Kind::segment_alloc, 1'000'000, 0x100000, 1 << 20);
    block(ev::Kind::alloc, 2'000'000, 0x100000, 4096);
    writer_->commit();

    TraceView view;
    view.showOffscreen({1000, 700});
    QSignalSpy opened(&view, &TraceView::opened);
    QSignalSpy followed(&view, &TraceView::followed);
    view.follow(path, 50);
    QVERIFY(opened.wait(10000));
    QVERIFY(view.following());
    TraceDataPtr first = view.traceData();
    QVERIFY(first && first->live);
    QCOMPARE(first->end_ns, uint64_t(2'000'000));
    QCOMPARE(first->peaks.at(0)->bytes, int64_t(4096));
    const uint64_t first_view_end = view.timeline()->viewTo();

    // More events, committed: the next poll reads them.
    block(ev::Kind::alloc, 3'000'000, 0x101000, 8192);
    block(ev::Kind::free_requested, 4'000'000, 0x100000, 4096);
    block(ev::Kind::free_completed, 4'000'000, 0x100000, 4096);
    writer_->commit();
    QVERIFY(followed.wait(10000));
    TraceDataPtr grown = view.traceData();
    QCOMPARE(grown->end_ns, uint64_t(4'000'000));
    QCOMPARE(grown->peaks.at(0)->bytes, int64_t(4096 + 8192));
    QCOMPARE(grown->peaks.at(0)->ts_ns, uint64_t(3'000'000));
    QVERIFY2(
        view.timeline()->viewTo() > first_view_end,
        qPrintable(
            QString("view ends at %1, was %2").arg(view.timeline()->viewTo()).arg(first_view_end)));
    QVERIFY(view.timeline()->viewTo() > grown->end_ns);

    // Steps, each keeping 64 KiB more alive: the timeline gets their ticks and the Summary
    // says live memory grows (step 7 has not ended, so steps 1-6 are judged).
    for (uint64_t k = 1; k <= 7; ++k) {
      step(k, 4'000'000 + k * 100'000);
      block(ev::Kind::alloc, 4'000'000 + k * 100'000 + 10'000, 0x200000 + k * 0x10000, 64 << 10);
    }
    writer_->commit();
    QVERIFY(followed.wait(10000));
    TraceDataPtr stepped = view.traceData();
    QCOMPARE(stepped->steps.size(), size_t(7));
    QCOMPARE(stepped->steps.back(), (std::pair<int64_t, uint64_t>{7, 4'700'000}));
    QCOMPARE(stepped->live_growth.size(), size_t(1));
    QVERIFY(stepped->live_growth[0].growing);
    QVERIFY(!stepped->live_growth_reserved[0]);  // blocks: the allocated curve
    QCOMPARE(stepped->live_growth[0].slope_bytes_per_step, 65536.0);
    QCOMPARE(stepped->live_growth[0].boundaries.back().first, int64_t(6));
    const QString html = follow_html(*stepped);
    QVERIFY2(html.contains("grows by about 64.00 KiB per step") && html.contains("7 steps so far"),
             qPrintable(html));

    // Nothing new: no signal.
    followed.clear();
    QTest::qWait(300);
    QCOMPARE(followed.count(), 0);

    // The recording ends and is finalized: the view loads it fully, the peak as analysis has it.
    QSignalSpy loaded(&view, &TraceView::loaded);
    writer_->close(5'000'000);
    writer_.reset();
    st::finalize(path.toStdString(), {});
    QVERIFY(loaded.wait(20000));
    QVERIFY(!view.following());
    QVERIFY(view.traceData()->session);
    auto trace = tidemark::analysis::Trace::open(path.toStdString());
    QCOMPARE(view.traceData()->peaks.at(0)->bytes,
             tidemark::analysis::peak(trace, trace.devices()[0].id)->bytes);
  }

  // An injected PyTorch run being recorded: segments only (its own caching allocator), one
  // more 2 MiB segment per step. Follow judges growth on reserved memory there and says so.
  void reservedGrowthOfASegmentsOnlyRecording() {
    const QString path = test_dir() + "/segments.db";
    for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
    st::TraceMeta meta;
    meta.start_ts_ns = 1'000'000;
    writer_ = st::TraceWriter::create(path.toStdString(), meta);
    const ev::DeviceId cuda{ev::DeviceType::cuda, 0};
    for (uint64_t k = 1; k <= 8; ++k) {
      step(k, 1'000'000 + k * 100'000, cuda);
      ev::Event s;
      s.kind = ev::Kind::segment_alloc;
      s.ts_ns = 1'000'000 + k * 100'000 + 10'000;
      s.thread_id = 1;
      s.seq = ++seq_;
      s.device = cuda;
      s.block.addr = 0x40000000 + k * (2 << 20);
      s.block.size = 2 << 20;
      s.block.segment = s.block.addr;
      writer_->append(s, 0);
    }
    writer_->commit();
    const TraceDataPtr data = follow_trace_data(path.toStdString());
    QVERIFY(data);
    QCOMPARE(data->devices.size(), size_t(1));
    QCOMPARE(QString::fromStdString(data->devices[0].name), QString("cuda:0"));
    QVERIFY(data->live_growth_reserved.at(0));
    QVERIFY(data->live_growth.at(0).growing);
    QCOMPARE(data->live_growth.at(0).slope_bytes_per_step, double(2 << 20));
    const QString html = follow_html(*data);
    QVERIFY2(html.contains("reserved memory at the start of a step grows by about 2.00 MiB"),
             qPrintable(html));
    writer_.reset();
  }

  // A trace that is finalized already has nothing to follow: it is loaded as Open would.
  void followingAFinalizedTraceLoadsIt() {
    const QString path = recorded_trace();
    QVERIFY(!path.isEmpty());
    TraceView view;
    view.showOffscreen({1000, 700});
    QSignalSpy loaded(&view, &TraceView::loaded);
    view.follow(path, 50);
    QVERIFY(loaded.wait(60000));
    QVERIFY(!view.following());
    QVERIFY(view.traceData()->session);
    QVERIFY(!view.traceData()->live);
  }

  void followingAFileThatIsNotATraceSaysSo() {
    const QString path = write_file("not_a_trace.db", "hello, this is text");
    TraceView view;
    QSignalSpy failed(&view, &TraceView::failed);
    view.follow(path, 50);
    QVERIFY(failed.wait(10000));
    QVERIFY2(failed.first().first().toString().contains(path), qPrintable(view.errorText()));
    QVERIFY(!view.following());
  }
};

QTEST_MAIN(FollowTest)
#include "follow_test.moc"
