// TraceLoader: opens a trace and computes its TraceData off the GUI thread (QtConcurrent),
// reporting progress. A file that is not a finalized Tidemark trace of a schema this build
// reads (corrupt, foreign, newer) ends in failed() with a message naming the file.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <memory>

#include "gui/core/trace_data.h"

namespace tidemark::gui {

using TraceDataPtr = std::shared_ptr<const TraceData>;

class TraceLoader : public QObject {
  Q_OBJECT
 public:
  explicit TraceLoader(QObject* parent = nullptr);
  ~TraceLoader() override;

  // Starts loading `path` in the thread pool; returns at once.
  void load(const QString& path);
  bool is_running() const { return watcher_.isRunning(); }

  // The same work on the calling thread (screenshots, tests): the result, or empty with
  // `error` set.
  static TraceDataPtr load_now(const QString& path, QString* error);

 signals:
  void progress(int percent, const QString& what);
  void finished(tidemark::gui::TraceDataPtr data);
  void failed(const QString& message);

 private:
  struct Result {
    TraceDataPtr data;
    QString error;
  };
  QFutureWatcher<Result> watcher_;
};

}  // namespace tidemark::gui

Q_DECLARE_METATYPE(tidemark::gui::TraceDataPtr)
