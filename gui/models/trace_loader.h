// TraceLoader: opens a trace and computes its TraceData off the GUI thread (QtConcurrent),
// reporting progress, in stages (trace_data.h): opened() as soon as the timeline can be drawn,
// tablesReady() with the summary and tables, finished() with the findings too. A file that is not a
// finalized Tidemark trace of a schema this build reads (corrupt, foreign, newer) ends in failed()
// with a message naming the file.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <memory>
#include <mutex>

#include "gui/models/trace_data.h"

namespace tidemark::gui {

using TraceDataPtr = std::shared_ptr<const TraceData>;

class TraceLoader : public QObject {
  Q_OBJECT
 public:
  explicit TraceLoader(QObject* parent = nullptr);
  ~TraceLoader() override;

  // Starts loading `path` in the thread pool, sites named under `frames`; returns at once.
  void load(const QString& path, analysis::Frames frames = analysis::Frames::user);
  // The tables and findings of `data`'s trace (opened already) again, under `frames` (Note
  // [Frames in the GUI]): opened() with a copy of `data` marked Stage::opened and `frames`
  // (the views say "computing…" over what they show), then tablesReady() and finished() as a
  // load gives them. The session stays, so the timeline's view and the selections do. Replaces
  // any load or reload in progress.
  void reload(TraceDataPtr data, analysis::Frames frames);
  bool is_running() const { return watcher_.isRunning(); }
  // No more signals from the work in progress, which stops at its next stage; returns at once.
  void cancel();

  // The same work on the calling thread (screenshots, tests): the result, or empty with
  // `error` set.
  static TraceDataPtr load_now(const QString& path, QString* error,
                               analysis::Frames frames = analysis::Frames::user);

 signals:
  void progress(int percent, const QString& what);
  // Each carries a snapshot; in this order, opened and tablesReady only on success.
  void opened(tidemark::gui::TraceDataPtr data);       // Stage::opened
  void tablesReady(tidemark::gui::TraceDataPtr data);  // Stage::tables
  void finished(tidemark::gui::TraceDataPtr data);     // Stage::complete
  void failed(const QString& message);                 // the trace could not be opened

 private:
  // What a load shares with the loader: whether it was cancelled, and the loader while it
  // lives (both under the mutex, so a post never races the loader's destruction).
  struct Link {
    std::mutex mutex;
    TraceLoader* loader = nullptr;
    bool cancelled = false;
  };
  // A load (`from` null) or a reload of `from`.
  void start(const QString& path, TraceDataPtr from, analysis::Frames frames);
  QFutureWatcher<void> watcher_;
  std::shared_ptr<Link> link_;
};

}  // namespace tidemark::gui

Q_DECLARE_METATYPE(tidemark::gui::TraceDataPtr)
