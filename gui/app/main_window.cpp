#include "gui/app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

#include "gui/core/trace_view.h"

namespace tidemark::gui {

namespace {
constexpr int kMaxRecent = 10;
const char* const kRecentKey = "recentFiles";
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("Tidemark");
  setAcceptDrops(true);
  resize(1280, 860);
  tabs_ = new QTabWidget;
  tabs_->setTabsClosable(true);
  tabs_->setDocumentMode(true);
  connect(tabs_, &QTabWidget::tabCloseRequested, this, [this](int i) {
    QWidget* w = tabs_->widget(i);
    tabs_->removeTab(i);
    w->deleteLater();
  });
  auto* hint =
      new QLabel(tr("Open a trace: File > Open (Ctrl+O), drop a file here, or run "
                    "<tt>tidemark-gui FILE</tt>."));
  hint->setAlignment(Qt::AlignCenter);
  tabs_->setCornerWidget(nullptr);
  setCentralWidget(tabs_);
  statusBar()->addWidget(hint);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open..."), this, &MainWindow::openDialog);
  open->setShortcut(QKeySequence::Open);
  recent_ = file->addMenu(tr("Open &Recent"));
  file->addSeparator();
  QAction* close = file->addAction(tr("&Close tab"), this, [this] {
    if (tabs_->currentIndex() >= 0) emit tabs_->tabCloseRequested(tabs_->currentIndex());
  });
  close->setShortcut(QKeySequence::Close);
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::quit);
  quit->setShortcut(QKeySequence::Quit);
  rebuildRecentMenu();
}

void MainWindow::openFile(const QString& path) {
  auto* view = new TraceView;
  const int i = tabs_->addTab(view, QFileInfo(path).fileName());
  tabs_->setTabToolTip(i, path);
  tabs_->setCurrentIndex(i);
  connect(view, &TraceView::loaded, this, [this, path] {
    rememberRecent(path);
    statusBar()->showMessage(tr("Loaded %1").arg(path), 5000);
  });
  connect(view, &TraceView::failed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  view->load(path);
}

void MainWindow::openDialog() {
  const QStringList files = QFileDialog::getOpenFileNames(
      this, tr("Open trace"), {}, tr("Tidemark traces (*.db *.sqlite);;All files (*)"));
  for (const QString& f : files) openFile(f);
}

void MainWindow::rememberRecent(const QString& path) {
  QSettings settings;
  QStringList files = settings.value(kRecentKey).toStringList();
  const QString abs = QFileInfo(path).absoluteFilePath();
  files.removeAll(abs);
  files.prepend(abs);
  while (files.size() > kMaxRecent) files.removeLast();
  settings.setValue(kRecentKey, files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_->clear();
  const QStringList files = QSettings().value(kRecentKey).toStringList();
  for (const QString& f : files) recent_->addAction(f, this, [this, f] { openFile(f); });
  recent_->setEnabled(!files.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const QUrl& url : e->mimeData()->urls())
    if (url.isLocalFile()) openFile(url.toLocalFile());
  e->acceptProposedAction();
}

}  // namespace tidemark::gui
