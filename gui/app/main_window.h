// The main window: one TraceView tab per open trace; File > Open (Ctrl+O), recent files
// (QSettings), drag and drop of trace files, File > Export (Ctrl+E) of the current trace.
#pragma once

#include <QMainWindow>

class QMenu;
class QTabWidget;

namespace tidemark::gui {

class TraceView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  // A tab for `path`; with `follow`, a trace still being recorded grows on screen.
  void openFile(const QString& path, bool follow = false);
  // A tab for `a` with `b` overlaid and their differences listed.
  void openCompare(const QString& a, const QString& b);

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  void openDialog();
  void compareDialog();
  void exportDialog();
  TraceView* currentView() const;
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();

  QTabWidget* tabs_;
  QMenu* recent_;
  QAction* follow_;
};

}  // namespace tidemark::gui
