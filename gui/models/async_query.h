// AsyncQuery<T>: the one way the GUI runs a query off the GUI thread (Note [Async queries]).
// Every page, the timeline, the view's workflows (follow, compare, export) and the window's tools
// (What-if, Predict) own one per kind of question they ask; nothing else in gui/ starts work in
// the thread pool, except the loader's staged load (trace_loader.h).
//
// Note [Async queries]
// ~~~~~~~~~~~~~~~~~~~~
// A query is a function of what it captured (shared pointers to the trace, plain values: never
// the widget) and of a cancellation flag it may check between steps. request() hands it to the
// thread pool and returns at once; its result comes back on the GUI thread, to the callback
// given at construction, unless it went stale:
// * Latest wins. One query runs at a time (queries of one kind share caches and the session's
//   connection, trace_data.h); a request made meanwhile waits as the pending one, replacing any
//   earlier pending one, and sets the running one's flag. The running one's result is dropped:
//   only the latest request's result is delivered.
// * cancel() sets the flag and drops the running and the pending query: no result comes.
// * The GUI thread never waits for a query: not on a new request, not on cancel(), not on
//   destruction. A destroyed AsyncQuery sets the flag and lets its query run to its end in the
//   thread pool; what the query holds stays alive through its own captures, and the result is
//   dropped (the watcher that would deliver it is gone).
// * Test seam: with the QueryMode's `synchronous` set (tests, screenshots, benchmarks), a
//   request runs on the calling thread and delivers before it returns; a query still running in
//   the thread pool from before is dropped as stale, but runs on beside it (so a view is made
//   synchronous before it shows a trace, as TraceView::showOffscreen does). This is the only
//   place that chooses.
#pragma once

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

namespace tidemark::gui {

// How a view's queries run: shared by all the AsyncQuery objects of one view (its pages and
// its timeline), so one switch makes them all synchronous.
struct QueryMode {
  bool synchronous = false;
};
using QueryModePtr = std::shared_ptr<QueryMode>;

template <class T>
class AsyncQuery {
 public:
  using Cancelled = std::atomic<bool>;
  using Query = std::function<T(const Cancelled& cancelled)>;

  AsyncQuery(QueryModePtr mode, std::function<void(T)> deliver)
      : mode_(mode ? std::move(mode) : std::make_shared<QueryMode>()),
        deliver_(std::move(deliver)) {
    QObject::connect(&watcher_, &QFutureWatcherBase::finished, [this] { finished(); });
  }
  AsyncQuery(const AsyncQuery&) = delete;
  AsyncQuery& operator=(const AsyncQuery&) = delete;
  ~AsyncQuery() { cancel(); }  // the watcher goes without waiting (Note [Async queries])

  void request(Query query) {
    if (mode_->synchronous) {
      dropRunning();
      pending_.reset();
      deliver_(query(Cancelled{false}));
      return;
    }
    if (watcher_.isRunning()) {
      dropRunning();
      pending_ = std::move(query);
      return;
    }
    start(std::move(query));
  }
  void cancel() {
    dropRunning();
    pending_.reset();
  }
  // A query runs, or waits, whose result is still wanted.
  bool busy() const { return wanted_ || pending_.has_value(); }

 private:
  void start(Query query) {
    auto flag = flag_ = std::make_shared<Cancelled>(false);
    wanted_ = true;
    watcher_.setFuture(
        QtConcurrent::run([query = std::move(query), flag] { return query(*flag); }));
  }
  void dropRunning() {
    if (flag_) *flag_ = true;
    wanted_ = false;
  }
  void finished() {
    const bool wanted = std::exchange(wanted_, false);
    if (pending_) {
      Query next = std::move(*pending_);
      pending_.reset();
      start(std::move(next));
      return;
    }
    if (wanted && !watcher_.isCanceled()) deliver_(watcher_.result());
  }

  QueryModePtr mode_;
  std::function<void(T)> deliver_;
  QFutureWatcher<T> watcher_;
  std::shared_ptr<Cancelled> flag_;  // the running query's
  bool wanted_ = false;              // the running query's result is to be delivered
  std::optional<Query> pending_;
};

}  // namespace tidemark::gui
