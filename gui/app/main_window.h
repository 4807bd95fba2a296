// The main window: one TraceView tab per open trace; File > Open (Ctrl+O), recent files
// (QSettings), drag and drop of trace files, File > Export (Ctrl+E) of the current trace,
// Tools > What-if replay (Ctrl+R): the current trace replayed under other allocator settings,
// opened in Compare with it; Tools > Predict (Ctrl+P): the peak against the size that varies,
// from runs at two or more sizes; View > All frames (Ctrl+L): the current view's rule for sites.
#pragma once

#include <QMainWindow>
#include <QString>
#include <memory>

#include "gui/models/async_query.h"
#include "gui/pages/prediction_widget.h"
#include "profiler/naming/site_rule.h"

class QMenu;
class QTabWidget;
class QTemporaryDir;

namespace tidemark::gui {

class TraceView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;
  // A tab for `path`; with `follow`, a trace still being recorded grows on screen.
  void openFile(const QString& path, bool follow = false);
  // A tab for `a` with `b` overlaid and their differences listed.
  void openCompare(const QString& a, const QString& b);
  // The rule for sites that tabs opened from now on start with (the command line's --frames).
  void setStartFrames(analysis::Frames frames) { start_frames_ = frames; }

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  void openDialog();
  void compareDialog();
  void exportDialog();
  void whatIfDialog();
  void predictDialog();
  TraceView* currentView() const;
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();
  void showFrames();  // the View menu's toggle says the current view's rule for sites
  // What a What-if replay wrote (`out`: the replay of `trace`), or why it could not.
  struct Replayed {
    QString trace, out, label, error;
  };
  void replayed(const Replayed& r);
  void predicted(PredictionCurve curve);

  QTabWidget* tabs_;
  QMenu* recent_;
  QAction* follow_;
  QAction* all_frames_;
  analysis::Frames start_frames_ = analysis::Frames::user;
  std::unique_ptr<QTemporaryDir> replays_;  // What-if replays, removed with the window
  int replay_count_ = 0;
  // Tools > What-if and Predict run as every query does (Note [Async queries]): one of each at a
  // time, a request made while one runs replacing it. Last: they go first.
  AsyncQuery<Replayed> what_if_;
  AsyncQuery<PredictionCurve> predict_;
};

}  // namespace tidemark::gui
