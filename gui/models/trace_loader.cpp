#include "gui/models/trace_loader.h"

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
  if (!link_) return;
  std::lock_guard<std::mutex> lock(link_->mutex);
  link_->cancelled = true;
  link_->loader = nullptr;
}

TraceDataPtr TraceLoader::load_now(const QString& path, QString* error, analysis::Frames frames) {
  try {
    if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
    return load_trace_data(path.toStdString(), {}, frames);
  } catch (const std::exception& e) {
    if (error) *error = with_file(path, QString::fromStdString(e.what()));
  } catch (...) {
    if (error) *error = with_file(path, "unreadable trace");
  }
  return nullptr;
}

void TraceLoader::load(const QString& path, analysis::Frames frames) {
  start(path, nullptr, frames);
}

void TraceLoader::reload(TraceDataPtr data, analysis::Frames frames) {
  const QString path = QString::fromStdString(data->path);
  start(path, std::move(data), frames);
}

void TraceLoader::start(const QString& path, TraceDataPtr from, analysis::Frames frames) {
  cancel();
  auto link = link_ = std::make_shared<Link>();
  link->loader = this;
  // Nothing waits for the task: it posts each result as a queued call while the loader lives
  // and this load is not cancelled (checked under the mutex that cancel() and the destructor
  // take), and a call queued before a cancel() checks again when it runs; a call queued to a
  // loader that is gone by then is dropped by Qt (the context object died).
  watcher_.setFuture(QtConcurrent::run([path, from, frames, link] {
    auto post = [link](auto fn) {
      std::lock_guard<std::mutex> lock(link->mutex);
      if (link->cancelled) return;
      QMetaObject::invokeMethod(
          link->loader,
          [link, fn = std::move(fn)] {
            if (!link->cancelled) fn(link->loader);
          },
          Qt::QueuedConnection);
    };
    auto cancelled = [link] {
      std::lock_guard<std::mutex> lock(link->mutex);
      return link->cancelled;
    };
    auto report = [&](int percent, const std::string& what) {
      post([percent, w = QString::fromStdString(what)](TraceLoader* l) {
        emit l->progress(percent, w);
      });
    };
    std::shared_ptr<TraceData> data;
    try {
      if (from) {
        // The trace shown, its tables to compute again: a copy (made here, off the GUI
        // thread), which says they are coming and under which rule.
        data = std::make_shared<TraceData>(*from);
        data->stage = Stage::opened;
        data->frames = frames;
        data->late_error.clear();
      } else {
        if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
        report(0, "opening");
        data = open_trace_data(path.toStdString());
        data->frames = frames;
      }
    } catch (const std::exception& e) {
      post([m = with_file(path, QString::fromStdString(e.what()))](TraceLoader* l) {
        emit l->failed(m);
      });
      return;
    } catch (...) {
      post([m = with_file(path, "unreadable trace")](TraceLoader* l) { emit l->failed(m); });
      return;
    }
    TraceDataPtr snapshot = std::make_shared<const TraceData>(*data);
    post([snapshot](TraceLoader* l) { emit l->opened(snapshot); });
    try {
      // A connection of our own: the timeline's queries use the session's meanwhile.
      analysis::Trace own = open_own_trace(*data);  // data->frames is `frames`
      if (cancelled()) return;
      compute_tables(*data, own, report);
      snapshot = std::make_shared<const TraceData>(*data);
      post([snapshot](TraceLoader* l) { emit l->tablesReady(snapshot); });
      if (cancelled()) return;
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
    post([done](TraceLoader* l) { emit l->finished(done); });
  }));
}

}  // namespace tidemark::gui
