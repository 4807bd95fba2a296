#include "gui/app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>

#include "gui/pages/prediction_widget.h"
#include "gui/pages/trace_view.h"
#include "gui/pages/what_if.h"

namespace tidemark::gui {

namespace {
constexpr int kMaxRecent = 10;
const char* const kRecentKey = "recentFiles";
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      what_if_(nullptr, [this](Replayed r) { replayed(r); }),
      predict_(nullptr, [this](PredictionCurve c) { predicted(std::move(c)); }) {
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
  QAction* compare =
      file->addAction(tr("&Compare two traces..."), this, &MainWindow::compareDialog);
  compare->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  QAction* exp = file->addAction(tr("&Export..."), this, &MainWindow::exportDialog);
  exp->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  file->addSeparator();
  QAction* close = file->addAction(tr("&Close tab"), this, [this] {
    if (tabs_->currentIndex() >= 0) emit tabs_->tabCloseRequested(tabs_->currentIndex());
  });
  close->setShortcut(QKeySequence::Close);
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::quit);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  QMenu* stack = view->addMenu(tr("&Stack the timeline"));
  const std::pair<QString, TimelineWidget::Stacking> stackings[] = {
      {tr("&Allocated (no bands)"), TimelineWidget::Stacking::none},
      {tr("By &category"), TimelineWidget::Stacking::category},
      {tr("By top &site"), TimelineWidget::Stacking::site}};
  for (int i = 0; i < 3; ++i) {
    const auto s = stackings[i].second;
    QAction* a = stack->addAction(stackings[i].first, this, [this, s] {
      if (auto* v = currentView()) v->setStacking(s);
    });
    a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
  }
  follow_ = view->addAction(tr("&Follow (a trace being recorded)"));
  follow_->setCheckable(true);
  follow_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_F));
  connect(follow_, &QAction::toggled, this, [this](bool on) {
    if (auto* v = currentView()) v->setFollow(on);
  });
  // The current view's rule for sites (Note [Frames in the GUI]), as its toggle.
  all_frames_ = view->addAction(tr("&All frames (sites may be library code; nothing folded)"));
  all_frames_->setCheckable(true);
  all_frames_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  connect(all_frames_, &QAction::toggled, this, [this](bool on) {
    if (auto* v = currentView()) v->setFrames(on ? analysis::Frames::all : analysis::Frames::user);
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    const QSignalBlocker block(follow_);
    auto* v = currentView();
    follow_->setChecked(v && v->following());
    showFrames();
  });
  QMenu* tools = menuBar()->addMenu(tr("&Tools"));
  QAction* what_if = tools->addAction(tr("&What-if replay..."), this, &MainWindow::whatIfDialog);
  what_if->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* predict =
      tools->addAction(tr("&Predict the peak at other sizes..."), this, &MainWindow::predictDialog);
  predict->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
  rebuildRecentMenu();
}

MainWindow::~MainWindow() = default;

// Tools > What-if replay: asks for PYTORCH_CUDA_ALLOC_CONF settings and a capacity, replays
// the current trace under them off the GUI thread (gui/pages/what_if.h), and opens the replay
// in Compare with the recording: the replayed reserved curve over the recorded one.
void MainWindow::whatIfDialog() {
  TraceView* view = currentView();
  if (!view || !view->traceData()) {
    statusBar()->showMessage(tr("What-if: open a trace first"), 5000);
    return;
  }
  const QString trace = QString::fromStdString(view->traceData()->path);
  QDialog dialog(this);
  dialog.setWindowTitle(tr("What-if replay of %1").arg(QFileInfo(trace).fileName()));
  auto* form = new QFormLayout(&dialog);
  auto* conf = new QLineEdit(QStringLiteral("expandable_segments:True"));
  conf->setPlaceholderText(tr("as recorded"));
  conf->setToolTip(
      tr("PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb, roundup_power2_divisions, "
         "garbage_collection_threshold, expandable_segments"));
  auto* capacity = new QLineEdit;
  capacity->setPlaceholderText(tr("as recorded, e.g. 80GB"));
  form->addRow(tr("PYTORCH_CUDA_ALLOC_CONF"), conf);
  form->addRow(tr("Device capacity"), capacity);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  form->addRow(buttons);
  if (dialog.exec() != QDialog::Accepted) return;

  if (!replays_) replays_ = std::make_unique<QTemporaryDir>();
  const QString out = replays_->filePath(QStringLiteral("replay-%1.db").arg(++replay_count_));
  const WhatIf what{conf->text(), capacity->text()};
  const QString label =
      what.alloc_conf.trimmed().isEmpty() ? tr("recorded settings") : what.alloc_conf.trimmed();
  statusBar()->showMessage(tr("Replaying %1 under %2…").arg(QFileInfo(trace).fileName(), label));
  what_if_.request([trace, what, out, label](const auto&) {
    return Replayed{trace, out, label, replay_to_file(trace, what, out)};
  });
}

void MainWindow::replayed(const Replayed& r) {
  if (!r.error.isEmpty()) {
    statusBar()->showMessage(tr("What-if: %1").arg(r.error));
    return;
  }
  openCompare(r.trace, r.out);
  tabs_->setTabText(tabs_->currentIndex(),
                    tr("%1 vs replay (%2)").arg(QFileInfo(r.trace).fileName(), r.label));
}

// Tools > Predict: picks two or more traces of one program at different sizes, asks each one's
// size (guessed from the number its file name ends in), a capacity and settings, predicts off
// the GUI thread (gui/pages/prediction_widget.h) and opens the chart in a tab of its own.
void MainWindow::predictDialog() {
  const QStringList files =
      QFileDialog::getOpenFileNames(this, tr("Predict: runs of one program at two or more sizes"),
                                    {}, tr("Tidemark traces (*.db);;All files (*)"));
  if (files.isEmpty()) return;
  if (files.size() < 2) {
    statusBar()->showMessage(tr("Predict: pick runs at two or more sizes"), 5000);
    return;
  }
  QDialog dialog(this);
  dialog.setWindowTitle(tr("Predict the peak at other sizes"));
  auto* form = new QFormLayout(&dialog);
  std::vector<QLineEdit*> sizes;
  for (const QString& f : files) {
    const auto guess = size_in_file_name(f);
    auto* edit = new QLineEdit(guess ? QString::number(*guess) : QString());
    edit->setPlaceholderText(tr("the size this run was at (batch, sequence length...)"));
    form->addRow(QFileInfo(f).fileName(), edit);
    sizes.push_back(edit);
  }
  auto* capacity = new QLineEdit;
  capacity->setPlaceholderText(tr("as recorded, e.g. 80GiB"));
  auto* conf = new QLineEdit;
  conf->setPlaceholderText(tr("as recorded"));
  form->addRow(tr("Device capacity"), capacity);
  form->addRow(tr("PYTORCH_CUDA_ALLOC_CONF"), conf);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  form->addRow(buttons);
  if (dialog.exec() != QDialog::Accepted) return;
  std::vector<std::pair<double, QString>> runs;
  for (int i = 0; i < files.size(); ++i) {
    bool ok = false;
    const double x = sizes[static_cast<size_t>(i)]->text().trimmed().toDouble(&ok);
    if (!ok || !(x > 0)) {
      statusBar()->showMessage(tr("Predict: %1: the size must be a positive number")
                                   .arg(QFileInfo(files[i]).fileName()));
      return;
    }
    runs.emplace_back(x, files[i]);
  }
  statusBar()->showMessage(tr("Predicting from %1 runs…").arg(runs.size()));
  predict_.request([runs, cap = capacity->text(), alloc = conf->text()](const auto&) {
    return predict_curve(runs, cap, alloc);
  });
}

void MainWindow::predicted(PredictionCurve curve) {
  if (!curve.error.isEmpty()) {
    statusBar()->showMessage(tr("Predict: %1").arg(curve.error));
    return;
  }
  auto* chart = new PredictionWidget;
  const QString title = tr("Prediction (%1)").arg(curve.device);
  chart->setCurve(std::move(curve));
  chart->setToolTip(chart->curve().notes.join('\n'));
  tabs_->setCurrentIndex(tabs_->addTab(chart, title));
  statusBar()->showMessage(chart->caption());
}

// File > Export: the current trace as a PyTorch memory snapshot (pytorch.org/memory_viz),
// Chrome/Perfetto trace JSON or a CSV of allocations, chosen by the extension typed (.pickle,
// .json, .csv), else by the file type picked.
void MainWindow::exportDialog() {
  TraceView* view = currentView();
  if (!view || !view->traceData()) {
    statusBar()->showMessage(tr("Export: open a trace first"), 5000);
    return;
  }
  const QString snapshot = tr("PyTorch memory snapshot, for pytorch.org/memory_viz (*.pickle)");
  const QString chrome = tr("Chrome / Perfetto trace (*.json)");
  const QString csv = tr("CSV of allocations (*.csv)");
  QFileInfo trace(QString::fromStdString(view->traceData()->path));
  QString filter = snapshot;
  const QString out =
      QFileDialog::getSaveFileName(this, tr("Export %1").arg(trace.fileName()),
                                   trace.dir().filePath(trace.completeBaseName() + ".pickle"),
                                   QStringList{snapshot, chrome, csv}.join(";;"), &filter);
  if (out.isEmpty()) return;
  // The extension typed decides; without a known one, the file type chosen.
  const QString suffix = QFileInfo(out).suffix().toLower();
  const auto format =
      suffix == "json" || (suffix != "csv" && suffix != "pickle" && filter == chrome)
          ? TraceView::ExportFormat::chrome
      : suffix == "csv" || (suffix != "pickle" && filter == csv)
          ? TraceView::ExportFormat::csv
          : TraceView::ExportFormat::snapshot;
  statusBar()->showMessage(tr("Exporting %1…").arg(out));
  view->exportTo(out, format);
}

TraceView* MainWindow::currentView() const {
  return qobject_cast<TraceView*>(tabs_->currentWidget());
}

void MainWindow::openCompare(const QString& a, const QString& b) {
  openFile(a);
  auto* view = currentView();
  tabs_->setTabText(tabs_->currentIndex(),
                    tr("%1 vs %2").arg(QFileInfo(a).fileName(), QFileInfo(b).fileName()));
  connect(view, &TraceView::compareFailed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  view->compareWith(b);
}

void MainWindow::compareDialog() {
  const QString filter = tr("Tidemark traces (*.db *.sqlite);;All files (*)");
  const QString a = QFileDialog::getOpenFileName(this, tr("Compare: trace A"), {}, filter);
  if (a.isEmpty()) return;
  const QString b = QFileDialog::getOpenFileName(this, tr("Compare: trace B"), {}, filter);
  if (!b.isEmpty()) openCompare(a, b);
}

void MainWindow::showFrames() {
  const QSignalBlocker block(all_frames_);
  auto* v = currentView();
  all_frames_->setChecked(v && v->selection()->frames() == analysis::Frames::all);
}

void MainWindow::openFile(const QString& path, bool follow) {
  auto* view = new TraceView;
  view->setFrames(start_frames_);
  connect(view->selection(), &ViewSelection::framesChanged, this, [this, view] {
    if (view == currentView()) showFrames();
  });
  const int i = tabs_->addTab(view, QFileInfo(path).fileName());
  tabs_->setTabToolTip(i, path);
  tabs_->setCurrentIndex(i);
  connect(view, &TraceView::loaded, this, [this, path] {
    rememberRecent(path);
    statusBar()->showMessage(tr("Loaded %1").arg(path), 5000);
  });
  connect(view, &TraceView::failed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  connect(view, &TraceView::exported, this,
          [this](bool, const QString& message) { statusBar()->showMessage(message, 10000); });
  if (follow) {
    view->follow(path);
    const QSignalBlocker block(follow_);
    follow_->setChecked(true);
  } else {
    view->load(path);
  }
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
