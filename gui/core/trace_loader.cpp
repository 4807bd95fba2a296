#include "gui/core/trace_loader.h"

#include <QFileInfo>
#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>
#include <exception>

namespace tidemark::gui {

namespace {

// The analysis library names the file in its errors; make sure every message does.
QString with_file(const QString& path, const QString& message) {
  if (message.contains(path)) return message;
  return path + ": " + message;
}

}  // namespace

TraceLoader::TraceLoader(QObject* parent) : QObject(parent) {
  qRegisterMetaType<TraceDataPtr>();
}

TraceLoader::~TraceLoader() {
  cancel();
}

void TraceLoader::cancel() {
  if (cancelled_) *cancelled_ = true;
  watcher_.waitForFinished();
}

TraceDataPtr TraceLoader::load_now(const QString& path, QString* error) {
  try {
    if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
    return load_trace_data(path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = with_file(path, QString::fromStdString(e.what()));
  } catch (...) {
    if (error) *error = with_file(path, "unreadable trace");
  }
  return nullptr;
}

void TraceLoader::load(const QString& path) {
  cancel();
  auto cancelled = cancelled_ = std::make_shared<std::atomic<bool>>(false);
  // `this` outlives the task: the destructor waits for it. Results go back as queued calls in
  // the order they were made; one queued to a loader that is gone by then is dropped by Qt
  // (the context object died), and a cancelled load posts nothing more.
  watcher_.setFuture(QtConcurrent::run([path, this, cancelled] {
    auto post = [this, cancelled](auto fn) {
      if (*cancelled) return;
      QMetaObject::invokeMethod(this, std::move(fn), Qt::QueuedConnection);
    };
    auto report = [&](int percent, const std::string& what) {
      post([this, percent, w = QString::fromStdString(what)] { emit progress(percent, w); });
    };
    std::shared_ptr<TraceData> data;
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      report(0, "opening");
      data = open_trace_data(path.toStdString());
    } catch (const std::exception& e) {
      post([this, m = with_file(path, QString::fromStdString(e.what()))] { emit failed(m); });
      return;
    } catch (...) {
      post([this, m = with_file(path, "unreadable trace")] { emit failed(m); });
      return;
    }
    TraceDataPtr snapshot = std::make_shared<const TraceData>(*data);
    post([this, snapshot] { emit opened(snapshot); });
    try {
      // A connection of our own: the timeline's queries use the session's meanwhile.
      analysis::Trace own = analysis::Trace::open(path.toStdString());
      if (*cancelled) return;
      compute_tables(*data, own, report);
      snapshot = std::make_shared<const TraceData>(*data);
      post([this, snapshot] { emit tablesReady(snapshot); });
      if (*cancelled) return;
      report(75, "diagnosing");
      compute_findings(*data, own);
    } catch (const std::exception& e) {
      data->late_error = e.what();
      data->stage = Stage::complete;
    } catch (...) {
      data->late_error = "unreadable trace";
      data->stage = Stage::complete;
    }
    report(100, "done");
    TraceDataPtr done = std::move(data);
    post([this, done] { emit finished(done); });
  }));
}

}  // namespace tidemark::gui
