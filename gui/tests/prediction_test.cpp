// Tools > Predict (gui/pages/prediction_widget.h): the curve of a made-up program whose peak is
// known by hand at every size (a 1 MiB weight, then per step an activation of 64 x bytes and
// scores of x^2 bytes), where it stops fitting a capacity, and the chart drawn offscreen with
// its capacity line where the capacity is; bad input comes back as one line.
#include <QImage>
#include <QTest>

#include "gui/pages/prediction_widget.h"
#include "gui/tests/test_traces.h"
#include "profiler/store/trace_writer.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace ev = tidemark::events;
namespace st = tidemark::store;

namespace {

uint64_t peak_at(double x) {
  return (uint64_t{1} << 20) + static_cast<uint64_t>(64 * x + x * x);
}

QString write_run(uint64_t x) {
  const QString path = test_dir() + QStringLiteral("/predict_x%1.db").arg(x);
  for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
  st::TraceMeta meta;
  meta.start_ts_ns = 1000;
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", 0});
  auto w = st::TraceWriter::create(path.toStdString(), meta);
  for (uint64_t id = 1; id <= 3; ++id) w->add_stack_node(id, 0, 0x100 * id);
  uint64_t seq = 0, ts = 2000, addr = 0x10000;
  auto event = [&](ev::Kind k, uint64_t a, uint64_t bytes, uint64_t stack) {
    ev::Event e;
    e.kind = k;
    e.seq = ++seq;
    e.ts_ns = ts++;
    e.thread_id = 1;
    e.block.addr = a;
    e.block.size = bytes;
    e.block.requested_size = bytes;
    e.block.segment = 0x10000;
    w->append(e, stack);
  };
  event(ev::Kind::segment_alloc, 0x10000, uint64_t{1} << 30, 0);
  auto alloc = [&](uint64_t bytes, uint64_t stack) {
    const uint64_t a = addr;
    addr += bytes;
    event(ev::Kind::alloc, a, bytes, stack);
    return std::make_pair(a, bytes);
  };
  auto release = [&](std::pair<uint64_t, uint64_t> b) {
    event(ev::Kind::free_requested, b.first, b.second, 0);
    event(ev::Kind::free_completed, b.first, b.second, 0);
  };
  alloc(uint64_t{1} << 20, 1);
  for (int step = 0; step < 3; ++step) {
    auto act = alloc(64 * x, 2);
    auto scores = alloc(x * x, 3);
    release(scores);
    release(act);
  }
  w->close(ts);
  w.reset();
  st::finalize(path.toStdString());
  return path;
}

}  // namespace

class PredictionTest : public QObject {
  Q_OBJECT

 private slots:
  void theCurveIsThePeakAtEverySize() {
    const std::vector<std::pair<double, QString>> runs = {
        {64, write_run(64)}, {128, write_run(128)}, {256, write_run(256)}};
    const PredictionCurve c = predict_curve(runs, QStringLiteral("16MiB"), {});
    QVERIFY2(c.error.isEmpty(), qPrintable(c.error));
    QCOMPARE(c.points.front().x, 64.0);
    QVERIFY(c.points.back().x >= 4 * 256.0);
    int runs_seen = 0;
    for (const PredictionPoint& p : c.points) {
      if (p.run) ++runs_seen;
      // The hand-derived peak, rounded as the allocation sizes are (to a byte each).
      QVERIFY2(std::llabs(static_cast<long long>(p.requested) -
                          static_cast<long long>(peak_at(p.x))) <= 2,
               qPrintable(QStringLiteral("at %1: %2").arg(p.x).arg(p.requested)));
      QVERIFY(p.reserved >= p.requested);
    }
    QCOMPARE(runs_seen, 3);
    // 16 MiB. The weight (1 MiB) and the activation (under 1 MiB) are small-pool requests: one
    // 2 MiB segment. The scores (x^2 bytes) fit a second 2 MiB small segment while at most
    // 1 MiB, x <= 1024; from 1 to 10 MiB a large request takes a 20 MiB segment, over the
    // capacity; past 10 MiB a segment of its size rounded up to 2 MiB, which fits the 14 MiB
    // left again from x = 3239 to 3831. The search doubles from the largest run and stops at
    // the first size that does not fit: 1024, not 3831.
    QVERIFY(c.largest_fitting.has_value());
    QCOMPARE(*c.largest_fitting, 1024.0);
    auto fits = [](double x) {
      const uint64_t scores = static_cast<uint64_t>(std::llround(x * x));
      if (scores <= (uint64_t{1} << 20)) return true;
      if (scores < (uint64_t{10} << 20)) return false;
      const uint64_t block = (scores + 511) / 512 * 512;
      return (block + (uint64_t{2} << 20) - 1) / (uint64_t{2} << 20) * (uint64_t{2} << 20) <=
             (uint64_t{14} << 20);
    };
    for (const PredictionPoint& p : c.points) {
      QVERIFY(p.fits.has_value());
      QCOMPARE(*p.fits, fits(p.x));
    }
  }

  void theChartDrawsTheCapacityAndSaysWhereItStopsFitting() {
    const std::vector<std::pair<double, QString>> runs = {{64, write_run(64)},
                                                          {128, write_run(128)}};
    PredictionWidget w;
    w.resize(900, 520);
    w.setCurve(predict_curve(runs, QStringLiteral("16MiB"), {}));
    QVERIFY(w.caption().contains(QStringLiteral("Fits 16.00 MiB up to")));
    QImage image(w.size(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    w.render(&image);
    const int y = static_cast<int>(std::lround(w.toWidget(0, 16.0 * (1 << 20)).y()));
    const int x = static_cast<int>(std::lround(w.toWidget(w.curve().points.front().x, 0).x())) + 40;
    bool red = false;
    for (int dy = -1; dy <= 1 && !red; ++dy)
      for (int dx = 0; dx < 40 && !red; ++dx) {
        const QColor c = image.pixelColor(x + dx, y + dy);
        red = c.red() > 150 && c.green() < 110 && c.blue() < 110;
      }
    QVERIFY2(red, "no capacity line where 16 MiB is drawn");
  }

  void badInputIsOneLine() {
    PredictionCurve c = predict_curve({{64, write_run(64)}}, {}, {});
    QVERIFY(c.error.contains(QStringLiteral("two runs")));
    QVERIFY(c.points.empty());
    c = predict_curve({{64, write_run(64)}, {128, write_run(128)}}, QStringLiteral("lots"), {});
    QVERIFY(c.error.contains(QStringLiteral("capacity lots")));
    c = predict_curve({{64, write_run(64)}, {128, test_dir() + "/missing.db"}}, {}, {});
    QVERIFY(c.error.contains(QStringLiteral("missing.db")));
    c = predict_curve({{64, write_run(64)}, {128, write_run(128)}}, {}, QStringLiteral("nope:1"));
    QVERIFY(!c.error.isEmpty());
    QVERIFY(!c.error.contains('\n'));
  }

  void theSizeIsTheNumberAFileNameEndsIn() {
    QCOMPARE(size_in_file_name("runs/b64.db"), std::optional<double>(64));
    QCOMPARE(size_in_file_name("snapshot_large_cl2048_fw.pickle.db"), std::optional<double>(2048));
    QCOMPARE(size_in_file_name("trace.db"), std::optional<double>());
  }
};

QTEST_MAIN(PredictionTest)
#include "prediction_test.moc"
