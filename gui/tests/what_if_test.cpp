// Tools > What-if replay (gui/pages/what_if.h): the recorded train_mlp trace replayed under
// expandable segments into a trace the window opens in Compare, its reserved peak the one the
// replay library computes; settings PyTorch refuses come back as one line, and nothing is
// written.
#include <QFile>
#include <QTest>

#include "gui/pages/what_if.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"
#include "profiler/replay/replay.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace an = tidemark::analysis;
namespace rp = tidemark::replay;

class WhatIfTest : public QObject {
  Q_OBJECT

 private slots:
  void replaysIntoATraceWithTheReplayedPeak() {
    const QString trace = recorded_trace();
    QVERIFY(!trace.isEmpty());
    const QString out = test_dir() + "/replayed.db";
    QCOMPARE(replay_to_file(trace, {"expandable_segments:True", ""}, out), QString());
    // What the library says the replay reaches...
    an::Trace recorded = an::Trace::open(trace.toStdString());
    std::vector<rp::Plan> plans = rp::build_plans(recorded);
    rp::Settings s;
    s.conf = rp::parse_alloc_conf("expandable_segments:True");
    const rp::Result r = rp::run(plans.front(), s);
    // ... is what the written trace holds, read back as any trace.
    an::Trace replayed = an::Trace::open(out.toStdString());
    QCOMPARE(QString::fromStdString(replayed.reader().meta().allocator_settings),
             QStringLiteral("expandable_segments:True"));
    const auto peak = an::peak(replayed, plans.front().device.id, tidemark::store::Curve::reserved);
    QVERIFY(peak.has_value());
    QCOMPARE(static_cast<uint64_t>(peak->bytes), r.figures.peak_reserved);
    // A second replay replaces the first.
    QCOMPARE(replay_to_file(trace, {"", "1GiB"}, out), QString());
    QCOMPARE(QString::fromStdString(
                 an::Trace::open(out.toStdString()).reader().meta().allocator_settings),
             QString::fromStdString(plans.front().recorded.text()));
  }

  void refusedSettingsSayWhyAndWriteNothing() {
    const QString trace = recorded_trace();
    QVERIFY(!trace.isEmpty());
    const QString out = test_dir() + "/refused.db";
    QFile::remove(out);
    QString error = replay_to_file(trace, {"expandable_segments:maybe", ""}, out);
    QVERIFY2(error.contains("expandable_segments must be True or False"), qPrintable(error));
    error = replay_to_file(trace, {"nonsense:1", ""}, out);
    QVERIFY2(error.contains("Unrecognized key 'nonsense'"), qPrintable(error));
    error = replay_to_file(trace, {"", "lots"}, out);
    QVERIFY2(error.contains("capacity lots"), qPrintable(error));
    QVERIFY(!QFile::exists(out));
  }
};

QTEST_MAIN(WhatIfTest)
#include "what_if_test.moc"
