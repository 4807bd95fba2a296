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
  connect(&watcher_, &QFutureWatcher<Result>::finished, this, [this] {
    Result r = watcher_.result();
    if (r.data)
      emit finished(r.data);
    else
      emit failed(r.error);
  });
}

TraceLoader::~TraceLoader() {
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
  watcher_.waitForFinished();
  // `this` outlives the task: the destructor waits for it. A progress event queued to a
  // loader that is gone by then is dropped by Qt (the context object died).
  watcher_.setFuture(QtConcurrent::run([path, this]() -> Result {
    Result r;
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      r.data = load_trace_data(path.toStdString(), [this](int percent, const std::string& what) {
        QMetaObject::invokeMethod(
            this, [this, percent, w = QString::fromStdString(what)] { emit progress(percent, w); },
            Qt::QueuedConnection);
      });
    } catch (const std::exception& e) {
      r.error = with_file(path, QString::fromStdString(e.what()));
    } catch (...) {
      r.error = with_file(path, "unreadable trace");
    }
    return r;
  }));
}

}  // namespace tidemark::gui
