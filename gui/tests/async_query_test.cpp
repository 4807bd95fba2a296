// AsyncQuery (gui/models/async_query.h, Note [Async queries]): the latest request's answer is the
// one delivered, stale ones are dropped, cancel() stops a query that checks its flag and
// delivers nothing, a destroyed AsyncQuery returns at once while its query still runs, and the
// synchronous mode answers before request() returns.
#include <QElapsedTimer>
#include <QTest>
#include <atomic>
#include <thread>

#include "gui/models/async_query.h"

using namespace tidemark::gui;
using namespace std::chrono_literals;

namespace {

// A query that runs until `open` (or its cancellation flag) is set, then answers `value`.
struct Gate {
  std::shared_ptr<std::atomic<bool>> open = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> started = std::make_shared<std::atomic<int>>(0),
                                    ended = std::make_shared<std::atomic<int>>(0),
                                    saw_cancel = std::make_shared<std::atomic<int>>(0);
  AsyncQuery<int>::Query query(int value) const {
    return [*this, value](const std::atomic<bool>& cancelled) {
      ++*started;
      while (!*open && !cancelled) std::this_thread::sleep_for(1ms);
      if (cancelled) ++*saw_cancel;
      ++*ended;
      return value;
    };
  }
};

// An AsyncQuery<int> that collects its answers, with query 1 of a Gate asked for.
struct Running {
  std::vector<int> got;
  Gate g;
  QueryModePtr mode = std::make_shared<QueryMode>();
  std::unique_ptr<AsyncQuery<int>> q =
      std::make_unique<AsyncQuery<int>>(mode, [this](int v) { got.push_back(v); });
  Running() { q->request(g.query(1)); }
};

}  // namespace

class AsyncQueryTest : public QObject {
  Q_OBJECT

 private slots:
  void theLatestRequestWins() {
    Running r;
    QTRY_COMPARE(r.g.started->load(), 1);
    r.q->request(r.g.query(2));  // waits for 1, then is replaced by 3
    r.q->request(r.g.query(3));
    QVERIFY(r.q->busy());
    QTRY_COMPARE(r.g.saw_cancel->load(), 1);  // 1 was told it went stale
    *r.g.open = true;
    QTRY_COMPARE(r.got, std::vector<int>{3});
    QCOMPARE(r.g.started->load(), 2);  // 2 never ran: one query at a time, the latest next
    QVERIFY(!r.q->busy());
  }

  void aSynchronousRequestDropsTheRunningOne() {
    Running r;
    QTRY_COMPARE(r.g.started->load(), 1);
    r.mode->synchronous = true;
    r.q->request([](const auto&) { return 2; });
    QCOMPARE(r.got, std::vector<int>{2});  // answered before request() returned
    *r.g.open = true;
    QTRY_COMPARE(r.g.ended->load(), 1);
    QTest::qWait(20);  // the stale answer's delivery would come now
    QCOMPARE(r.got, std::vector<int>{2});
  }

  void cancelDeliversNothing() {
    Running r;
    QTRY_COMPARE(r.g.started->load(), 1);
    r.q->request(r.g.query(2));
    r.q->cancel();
    QVERIFY(!r.q->busy());
    QTRY_COMPARE(r.g.saw_cancel->load(), 1);  // the query stopped without the gate opening
    QTest::qWait(20);
    QVERIFY(r.got.empty());
    QCOMPARE(r.g.started->load(), 1);             // the pending one went too
    r.q->request([](const auto&) { return 4; });  // and the next request is answered
    QTRY_COMPARE(r.got, std::vector<int>{4});
  }

  void destructionDoesNotWaitForTheRunningQuery() {
    std::vector<int> got;
    auto q = std::make_unique<AsyncQuery<int>>(nullptr, [&](int v) { got.push_back(v); });
    Gate g;
    auto ignores_cancel = [g](const std::atomic<bool>&) {  // runs until the gate opens
      ++*g.started;
      while (!*g.open) std::this_thread::sleep_for(1ms);
      ++*g.ended;
      return 1;
    };
    q->request(ignores_cancel);
    QTRY_COMPARE(g.started->load(), 1);
    QElapsedTimer t;
    t.start();
    q.reset();
    QVERIFY(t.elapsed() < 1000);
    QCOMPARE(g.ended->load(), 0);  // still running after the destructor returned
    *g.open = true;
    QTRY_COMPARE(g.ended->load(), 1);
    QTest::qWait(20);
    QVERIFY(got.empty());  // its answer went nowhere
  }
};

QTEST_MAIN(AsyncQueryTest)
#include "async_query_test.moc"
