// The timeline's geometry (gui/pages/timeline_layout.h) and its rank lanes (timeline_lanes.h),
// worked out by hand from the margins: where the plot, the lanes, the scope and sync lanes lie
// in a widget of a given size, and the scales between times and x, bytes and y.
#include <QTest>

#include "gui/pages/timeline_lanes.h"
#include "gui/pages/timeline_layout.h"

using namespace tidemark::gui;

class LayoutTest : public QObject {
  Q_OBJECT
 private slots:
  // 800 x 400 with 2 scope rows: the plot is 800 - 76 - 12 = 712 wide from x 76, and
  // 400 - 22 - (2 * 14 + 2) - 14 - 20 - 2 = 312 high from y 22 (bottom 333); the scope lane
  // starts 2 px under it (335, 28 high, bottom 362), the sync lane 3 px under that (365, 14).
  void partsOfAWidget() {
    TimelineLayout l{QSize(800, 400), 2, 1, 1000, 2000, 1000};
    QCOMPARE(l.plot(), QRect(76, 22, 712, 312));
    QCOMPARE(l.scopeLane(), QRect(76, 335, 712, 28));
    QCOMPARE(l.syncLane(), QRect(76, 365, 712, 14));
    QCOMPARE(l.lane(0), l.plot());
    QCOMPARE(l.lane(3), l.plot());  // one lane: every lane is the plot
    // Without scopes the plot takes the 30 px back (bottom 363), the sync lane 2 px under it.
    TimelineLayout bare{QSize(800, 400), 0, 1, 1000, 2000, 1000};
    QCOMPARE(bare.plot(), QRect(76, 22, 712, 342));
    QCOMPARE(bare.scopeLane().height(), 0);
    QCOMPARE(bare.syncLane(), QRect(76, 365, 712, 14));
  }

  // Times map linearly onto the plot's width; bytes onto a lane's height, 0 at its bottom row
  // and y_max at its top row.
  void scales() {
    TimelineLayout l{QSize(800, 400), 0, 1, 1000, 2000, 1000};
    QCOMPARE(l.tsToX(1000), 76.0);
    QCOMPARE(l.tsToX(1500), 76.0 + 356);
    QCOMPARE(l.tsToX(2000), 76.0 + 712);
    QCOMPARE(l.xToTs(76 + 178), uint64_t(1250));
    QCOMPARE(l.xToTs(0), uint64_t(1000));  // clamped to the view
    QCOMPARE(l.xToTs(5000), uint64_t(2000));
    QCOMPARE(l.valueToY(0), 363);           // the plot's bottom row (22 + 342 - 1)
    QCOMPARE(l.valueToY(1000), 363 - 341);  // its top row
    QCOMPARE(l.valueToY(500), 363 - 171);   // 0.5 * 341 = 170.5, rounded away from 0
  }

  // Three lanes share the plot's 312 px less two 6 px gaps: (312 - 12) / 3 = 100 each, at
  // y 22, 128 and 234; each lane's bytes run over its own height.
  void lanesSplitThePlot() {
    TimelineLayout l{QSize(800, 400), 2, 3, 0, 100, 99};
    QCOMPARE(l.lane(0), QRect(76, 22, 712, 100));
    QCOMPARE(l.lane(1), QRect(76, 128, 712, 100));
    QCOMPARE(l.lane(2), QRect(76, 234, 712, 100));
    QCOMPARE(l.lane(7), l.lane(2));  // clamped
    QCOMPARE(l.valueToY(0, 1), 227);
    QCOMPARE(l.valueToY(99, 1), 128);
  }

  // Ranks in order whatever the devices' order; a rank's devices share its lane; a device
  // without a rank goes to the first; one rank, or none, is one lane.
  void ranksToLanes() {
    TraceData data;
    data.devices = {{.id = 0, .name = "r2 cuda:0", .rank = 2},
                    {.id = 1, .name = "r0 cuda:0", .rank = 0},
                    {.id = 2, .name = "r2 cpu", .rank = 2},
                    {.id = 3, .name = "other"}};
    data.steps = {{1, 10}};
    data.rank_steps[2] = {{1, 20}, {2, 30}};
    const RankLanes lanes(data);
    QCOMPARE(lanes.count(), 2);
    QCOMPARE(lanes.of(0), 1);
    QCOMPARE(lanes.of(1), 0);
    QCOMPARE(lanes.of(2), 1);
    QCOMPARE(lanes.of(3), 0);
    QCOMPARE(lanes.label(0), QString("rank 0"));
    QCOMPARE(lanes.label(1), QString("rank 2"));
    QCOMPARE(lanes.steps(data, 1).size(), size_t(2));  // rank 2's own
    QCOMPARE(lanes.steps(data, 0).size(), size_t(1));  // rank 0 has none of its own: the trace's

    TraceData one;
    one.devices = {{.id = 0, .name = "cuda:0", .rank = 1}, {.id = 1, .name = "cpu", .rank = 1}};
    const RankLanes single(one);
    QCOMPARE(single.count(), 1);
    QCOMPARE(single.of(1), 0);
    QVERIFY(single.label(0).isEmpty());
    QCOMPARE(RankLanes().count(), 1);
  }
};

QTEST_GUILESS_MAIN(LayoutTest)
#include "layout_test.moc"
