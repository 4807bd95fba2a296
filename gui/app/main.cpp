// tidemark-gui: browse Tidemark traces (docs/gui.md).
//   tidemark-gui [FILE...]                 one tab per file
//   tidemark-gui --screenshot OUT.png [--view timeline|allocator|summary] FILE
// The screenshot mode renders offscreen and exits: 0, or 2 with one line naming the file
// and the problem (as the CLI's exit codes).
#include <QApplication>
#include <QCommandLineParser>
#include <QImage>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "gui/app/main_window.h"
#include "gui/core/timeline_widget.h"
#include "gui/core/trace_view.h"

namespace {

int fail(const QString& message) {
  std::fprintf(stderr, "tidemark-gui: %s\n", qPrintable(message));
  return 2;
}

int screenshot(const QString& out, const QString& view_name, const QString& path) {
  using tidemark::gui::TraceView;
  TraceView::View view;
  if (view_name == "timeline")
    view = TraceView::View::live;  // the timeline above the live-at-peak table
  else if (view_name == "allocator")
    view = TraceView::View::allocator;
  else if (view_name == "summary")
    view = TraceView::View::summary;
  else
    return fail("--view must be timeline, allocator or summary, got '" + view_name + "'");
  QString error;
  tidemark::gui::TraceDataPtr data = tidemark::gui::TraceLoader::load_now(path, &error);
  if (!data) return fail(error);
  TraceView w;
  w.setSynchronous(true);
  w.resize(1280, 860);
  w.setAttribute(Qt::WA_DontShowOnScreen);
  w.show();
  w.setTraceData(data);
  w.showView(view);
  QApplication::processEvents();
  if (!w.grab().toImage().save(out)) return fail(out + ": cannot write the image");
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
  QCommandLineOption view("view", "The view to render: timeline, allocator or summary.", "VIEW",
                          "timeline");
  parser.addOption(shot);
  parser.addOption(view);
  parser.addPositionalArgument("FILE", "Traces to open, one tab each.", "[FILE...]");
  if (!parser.parse(QApplication::arguments())) return fail(parser.errorText());
  if (parser.isSet("help")) parser.showHelp(0);
  const QStringList files = parser.positionalArguments();
  if (parser.isSet(shot)) {
    if (files.size() != 1) return fail("--screenshot needs exactly one FILE");
    return screenshot(parser.value(shot), parser.value(view), files.front());
  }
  tidemark::gui::MainWindow w;
  for (const QString& f : files) w.openFile(f);
  w.show();
  return app.exec();
}
