// tidemark-gui: browse Tidemark traces (docs/gui.md).
//   tidemark-gui [FILE...]                 one tab per file
//   tidemark-gui --compare A B             A with B overlaid, and their differences
//   tidemark-gui --follow FILE             a trace still being recorded, growing on screen
//   tidemark-gui --screenshot OUT.png [--view timeline|allocator|summary|flame|compare]
//                (--view flame with --compare A B: A's peak coloured by its change in B)
//                [--stack category|site] FILE  (or --compare A B)
//   --categories RULES.json                custom categories, as the CLI's --categories
//   --frames user|all                      which frames name a site, as the CLI's --frames
//                                          (user: library frames folded in flame graphs)
// The screenshot mode renders offscreen and exits: 0, or 2 with one line naming the file
// and the problem (as the CLI's exit codes).
#include <QApplication>
#include <QComboBox>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QImage>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gui/app/main_window.h"
#include "gui/models/trace_data.h"
#include "gui/pages/flame_widget.h"
#include "gui/pages/timeline_widget.h"
#include "gui/pages/trace_view.h"
#include "profiler/analysis/output_file.h"

namespace {

int fail(const QString& message) {
  std::fprintf(stderr, "tidemark-gui: %s\n", qPrintable(message));
  return 2;
}

int screenshot(const QString& out, const QString& view_name, const QString& stack,
               tidemark::analysis::Frames frames, const QString& path, const QString& other) {
  using tidemark::gui::TimelineWidget;
  using tidemark::gui::TraceView;
  // Never over a trace it shows; through a temporary renamed into place (Note [Output files]).
  std::optional<tidemark::analysis::OutputFile> file;
  try {
    std::vector<std::string> inputs{path.toStdString()};
    if (!other.isEmpty()) inputs.push_back(other.toStdString());
    file.emplace(out.toStdString(), inputs);
  } catch (const tidemark::analysis::OutputError& e) {
    return fail(QString::fromStdString(e.what()));
  }
  TraceView::View view;
  if (view_name == "compare" && !other.isEmpty())
    view = TraceView::View::compare;
  else if (view_name == "timeline")
    view = TraceView::View::live;  // the timeline above the live-at-peak table
  else if (view_name == "allocator")
    view = TraceView::View::allocator;
  else if (view_name == "summary")
    view = TraceView::View::summary;
  else if (view_name == "flame")
    view = TraceView::View::flame;
  else
    return fail(
        "--view must be timeline, allocator, summary, flame or compare (with --compare), "
        "got '" +
        view_name + "'");
  TimelineWidget::Stacking stacking = TimelineWidget::Stacking::none;
  if (stack == "category")
    stacking = TimelineWidget::Stacking::category;
  else if (stack == "site")
    stacking = TimelineWidget::Stacking::site;
  else if (!stack.isEmpty() && stack != "none")
    return fail("--stack must be none, category or site, got '" + stack + "'");
  QString error;
  tidemark::gui::TraceDataPtr data = tidemark::gui::TraceLoader::load_now(path, &error, frames);
  if (!data) return fail(error);
  TraceView w;
  w.setFrames(frames);  // before the data: nothing to compute again
  w.showOffscreen({1280, 860}, data);
  w.setStacking(stacking);
  if (!other.isEmpty()) {
    QString compare_error;
    QObject::connect(&w, &TraceView::compareFailed, [&](const QString& m) { compare_error = m; });
    w.compareWith(other);
    if (!compare_error.isEmpty()) return fail(compare_error);
  }
  w.showView(view);
  if (view == TraceView::View::flame && !other.isEmpty()) {  // the differential graph
    QComboBox* choice = w.flamePage()->choice();
    for (int i = 0; i < choice->count(); ++i)
      if (choice->itemText(i).contains("(blue: shrank)")) choice->setCurrentIndex(i);
  }
  QApplication::processEvents();
  // The format from OUT's name, as QImage::save would take it (the temporary's name has none).
  const QByteArray format = QFileInfo(out).suffix().toLatin1();
  if (!w.grab().toImage().save(QString::fromStdString(file->part_path()),
                               format.isEmpty() ? "PNG" : format.constData()))
    return fail(out + ": cannot write the image");
  try {
    file->commit();
  } catch (const tidemark::analysis::OutputError& e) {
    return fail(QString::fromStdString(e.what()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The screenshot mode needs no display.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--screenshot") continue;
    if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    // Only our one line on stderr: Qt's own warnings (no XDG_RUNTIME_DIR, fonts) are noise here.
    qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
      if (type == QtCriticalMsg || type == QtFatalMsg)
        std::fprintf(stderr, "tidemark-gui: %s\n", qPrintable(msg));
    });
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Tidemark");
  QApplication::setApplicationName("tidemark-gui");
  QCommandLineParser parser;
  parser.setApplicationDescription("Browse Tidemark memory traces.");
  parser.addHelpOption();
  QCommandLineOption shot("screenshot", "Render FILE offscreen into OUT.png and exit.", "OUT.png");
  QCommandLineOption view("view",
                          "The view to render: timeline, allocator, summary, flame or compare.",
                          "VIEW", "timeline");
  QCommandLineOption stack("stack", "Stack the rendered timeline: none, category or site.", "BY");
  QCommandLineOption compare("compare", "Open A with B overlaid and their differences listed.");
  QCommandLineOption follow("follow", "Follow FILE while it is being recorded.");
  QCommandLineOption frames("frames",
                            "Which frames name a site: user (the default; library frames folded "
                            "in flame graphs) or all.",
                            "user|all", "user");
  QCommandLineOption categories(
      "categories",
      "Custom categories: ordered regex rules on the frames (docs/cli.md, "
      "\"Custom categories\"); default: tidemark-categories.json beside "
      "the trace or in the working directory.",
      "RULES.json");
  parser.addOption(shot);
  parser.addOption(frames);
  parser.addOption(categories);
  parser.addOption(view);
  parser.addOption(stack);
  parser.addOption(compare);
  parser.addOption(follow);
  parser.addPositionalArgument("FILE", "Traces to open, one tab each.", "[FILE...]");
  if (!parser.parse(QApplication::arguments())) return fail(parser.errorText());
  if (parser.isSet("help")) parser.showHelp(0);
  const QStringList files = parser.positionalArguments();
  if (parser.isSet(compare) && files.size() != 2) return fail("--compare needs two files, A and B");
  using tidemark::analysis::Frames;
  if (parser.value(frames) != "user" && parser.value(frames) != "all")
    return fail("--frames must be user or all, got '" + parser.value(frames) + "'");
  const Frames rule = parser.value(frames) == "all" ? Frames::all : Frames::user;
  if (parser.isSet(categories)) {
    try {  // refused here, naming the file, rather than once per trace opened
      tidemark::analysis::CategoryRules::load(parser.value(categories).toStdString());
    } catch (const tidemark::analysis::CategoryRulesError& e) {
      return fail(QString("--categories: ") + e.what());
    }
    tidemark::gui::set_category_rules_file(parser.value(categories).toStdString());
  }
  if (parser.isSet(shot)) {
    if (parser.isSet(compare))
      return screenshot(parser.value(shot), parser.isSet(view) ? parser.value(view) : "compare",
                        parser.value(stack), rule, files[0], files[1]);
    if (files.size() != 1) return fail("--screenshot needs exactly one FILE");
    return screenshot(parser.value(shot), parser.value(view), parser.value(stack), rule,
                      files.front(), {});
  }
  tidemark::gui::MainWindow w;
  w.setStartFrames(rule);
  if (parser.isSet(compare))
    w.openCompare(files[0], files[1]);
  else
    for (const QString& f : files) w.openFile(f, parser.isSet(follow));
  w.show();
  return app.exec();
}
