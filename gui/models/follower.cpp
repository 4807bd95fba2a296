#include "gui/models/follower.h"

#include <QFileInfo>

namespace tidemark::gui {

Follower::Follower(ViewSelection* selection, QueryModePtr mode, QObject* parent)
    : QObject(parent),
      selection_(selection),
      query_(std::move(mode), [this](Polled p) { show(std::move(p)); }) {
  connect(&timer_, &QTimer::timeout, this, &Follower::poll);
}

void Follower::start(const QString& path, int interval_ms) {
  path_ = path;
  timer_.setInterval(interval_ms);
  timer_.start();  // before the read: a synchronous one that fails or finds the end stops it
  // Latest wins: a poll still running for the trace shown before is dropped.
  query_.request([path](const auto&) -> Polled {
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      TraceDataPtr data = follow_trace_data(path.toStdString());
      return {data, data == nullptr, {}};  // null: finalized already, loaded fully
    } catch (const std::exception& e) {
      const QString m = QString::fromStdString(e.what());
      return {nullptr, false, m.contains(path) ? m : path + ": " + m};
    }
  });
}

// In the thread pool: the event blocks committed since the last poll (LiveTrace::poll).
void Follower::poll() {
  const TraceDataPtr& data = selection_->data();
  if (!data || !data->live || query_.busy()) return;
  query_.request([data](const auto&) -> Polled {
    try {
      TraceDataPtr next = poll_trace_data(*data);
      const bool done =
          data->live->with([](const analysis::LiveTrace& l) { return l.finalized(); });
      return {next, done, {}};
    } catch (const std::exception& e) {
      return {nullptr, false, QString::fromStdString(e.what())};
    }
  });
}

void Follower::show(Polled p) {
  if (!p.error.isEmpty()) {
    timer_.stop();
    emit failed(p.error);
    return;
  }
  if (p.data) emit read(p.data);
  if (p.finalized) {  // the recording ended: everything, tables and findings included
    timer_.stop();
    emit finalized(path_);
  }
}

}  // namespace tidemark::gui
