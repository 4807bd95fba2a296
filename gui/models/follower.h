// Follower: a TraceView's Follow workflow. start() reads a trace being recorded (the curves of
// what was committed so far), then every interval reads again only the new event blocks
// (LiveTrace::poll), in the thread pool, while the view shows a followed trace; once the
// recording is finalized it says so (finalized()) and stops.
#pragma once

#include <QObject>
#include <QTimer>

#include "gui/models/async_query.h"
#include "gui/models/view_selection.h"

namespace tidemark::gui {

class Follower : public QObject {
  Q_OBJECT
 public:
  Follower(ViewSelection* selection, QueryModePtr mode, QObject* parent = nullptr);
  void start(const QString& path, int interval_ms);
  // One poll of the followed trace the selection shows (none while one runs).
  void poll();
  void resume() { timer_.start(); }
  void stop() { timer_.stop(); }
  bool active() const { return timer_.isActive(); }
  int interval() const { return timer_.interval(); }

 signals:
  void read(const tidemark::gui::TraceDataPtr& data);  // the events committed so far
  void finalized(const QString& path);                 // the recording ended
  void failed(const QString& message);                 // following stopped

 private:
  struct Polled {
    TraceDataPtr data;  // null: nothing new, or the trace could not be read
    bool finalized = false;
    QString error;
  };
  void show(Polled p);

  ViewSelection* selection_;
  QTimer timer_;
  QString path_;
  AsyncQuery<Polled> query_;
};

}  // namespace tidemark::gui
