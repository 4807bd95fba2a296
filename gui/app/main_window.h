// The main window: one TraceView tab per open trace; File > Open (Ctrl+O), recent files
// (QSettings), drag and drop of trace files.
#pragma once

#include <QMainWindow>

class QMenu;
class QTabWidget;

namespace tidemark::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  void openFile(const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  void openDialog();
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();

  QTabWidget* tabs_;
  QMenu* recent_;
};

}  // namespace tidemark::gui
