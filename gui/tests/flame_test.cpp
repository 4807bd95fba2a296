// The Flame graph tab: the geometry, hit testing and zoom of FlameWidget on a tree whose
// widths are worked out by hand; folds of library frames expanding and folding again on a
// click (Note [Folded library frames]); and on a recording of samples/pitfalls/accumulated_loss,
// that the graph of the allocated peak holds exactly the peak's bytes, that every frame holds
// the sum of its callees and its own, that the sample's own code is in it, and that its folds
// hide nothing: unfolded, they are the All frames graph.
#include <QComboBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTest>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "gui/pages/flame_widget.h"
#include "gui/pages/source_lines.h"
#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"
#include "profiler/store/trace_writer.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
using tidemark::analysis::FlameNode;
using Path = FlameWidget::Path;

namespace {

FlameNode leaf(const char* frame, int64_t bytes) {
  FlameNode n;
  n.frame = frame;
  n.bytes = n.self_bytes = bytes;
  n.count = 1;
  return n;
}

// all 100 = a 60 (a1 30, a2 20, its own 10) + b 40.
FlameNode hand_tree() {
  FlameNode a;
  a.frame = "a (a.cpp:1)";
  a.bytes = 60;
  a.self_bytes = 10;
  a.count = 3;
  a.children = {leaf("a1 (a.cpp:2)", 30), leaf("a2 (a.cpp:3)", 20)};
  FlameNode root;
  root.bytes = 100;
  root.count = 4;
  root.children = {std::move(a), leaf("b (b.cpp:1)", 40)};
  return root;
}

// Every node holds its callees' bytes and counts plus its own; returns the nodes seen.
int check_sums(const FlameNode& n) {
  int64_t bytes = n.self_bytes;
  int seen = 1;
  for (const FlameNode& c : n.children) {
    bytes += c.bytes;
    seen += check_sums(c);
    if (c.bytes > n.bytes) return -1000000;
  }
  return bytes == n.bytes ? seen : -1000000;
}

// The graph of stacks with known runs of library frames, under User frames (innermost first):
//   100 B in 2: main > step > L1 L2 L3 L4 L5 > hook > La Lb
//    50 B in 1: main > step > L1 L2 L3 L4 L5 > hook2
// all > main > step > "… 5 library frames (L1 …)" (150 B) > hook (100 B) > "… 2 library
// frames (La …)", and > hook2 (50 B).
FlameNode folded_tree(tidemark::analysis::Frames frames = tidemark::analysis::Frames::user) {
  auto stack = [](std::vector<std::string> innermost, int64_t bytes, uint64_t count) {
    tidemark::analysis::Group g;
    for (const char* f :
         {"L5 (l.cpp:5)", "L4 (l.cpp:4)", "L3 (l.cpp:3)", "L2 (l.cpp:2)", "L1 (l.cpp:1)"})
      innermost.push_back(f);
    innermost.insert(innermost.end(), {"step (t.py:7)", "main (t.py:1)"});
    for (const std::string& f : innermost) g.library.push_back(f[0] == 'L');
    g.frames = std::move(innermost);
    g.bytes = bytes;
    g.count = count;
    return g;
  };
  return tidemark::analysis::flame_tree(
      {stack({"Lb (b.cpp:9)", "La (a.cpp:3)", "hook (t.py:20)"}, 100, 2),
       stack({"hook2 (t.py:30)"}, 50, 1)},
      nullptr, frames);
}

// The stacks a graph draws, each as its frames from the root ('>' between them), with the
// bytes that end there (self bytes); folds expanded first, so a graph with folds and the one
// without give the same map.
void flat_stacks(const FlameNode& in, const std::string& path,
                 std::map<std::string, int64_t>& out) {
  const FlameNode n = tidemark::analysis::unfold(in);
  const std::string here = path + ">" + n.frame;
  if (n.self_bytes) out[here] += n.self_bytes;
  for (const FlameNode& c : n.children) flat_stacks(c, here, out);
}

int folds(const FlameNode& n) {
  int found = n.folded.empty() ? 0 : 1;
  for (const FlameNode& c : n.children) found += folds(c);
  return found;
}

bool contains_frame(const FlameNode& n, const QString& needle) {
  if (QString::fromStdString(n.frame).contains(needle)) return true;
  for (const auto& [location, bytes] : n.locations)
    if (QString::fromStdString(location).contains(needle)) return true;
  for (const FlameNode& c : n.children)
    if (contains_frame(c, needle)) return true;
  return false;
}

}  // namespace

class FlameTest : public QObject {
  Q_OBJECT
  // samples/pitfall_accumulated_loss recorded with `--stacks depth` (null when that fails).
  TraceDataPtr record(const QString& name, const QString& depth) {
    QProcess p;
    const QString path = test_dir() + "/" + name;
    for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
    p.start(TIDEMARK_CLI, {"record", "--stacks", depth, "-o", path, "--", TIDEMARK_ACCUMULATED_LOSS,
                           "--steps", "4"});
    if (!p.waitForFinished(120000) || p.exitCode() != 0) return nullptr;
    QString error;
    return TraceLoader::load_now(path, &error);
  }

 private slots:
  void geometryAndHitTesting() {
    FlameWidget w;
    w.resize(400, 200);
    w.setTree(hand_tree(), "live at the test peak");
    const int h = FlameWidget::kRowHeight;
    QCOMPARE(w.rectOf({}), QRectF(0, 0, 400, h));
    QCOMPARE(w.rectOf({0}), QRectF(0, h, 240, h));
    QCOMPARE(w.rectOf({1}), QRectF(240, h, 160, h));
    QCOMPARE(w.rectOf({0, 1}), QRectF(120, 2 * h, 80, h));
    QCOMPARE(w.pathAt({250, 1.5 * h}), std::optional<Path>(Path{1}));
    QCOMPARE(w.pathAt({130, 2.5 * h}), std::optional<Path>(Path{0, 1}));
    QCOMPARE(w.pathAt({230, 2.5 * h}), std::nullopt);  // a's own 10 bytes: no callee there
    QCOMPARE(w.pathAt({10, 0.5 * h}), std::optional<Path>(Path{}));
    QVERIFY(w.labelFor({}).contains("live at the test peak"));
    const QString tip = w.tooltipFor({0});
    QVERIFY2(tip.contains("a (a.cpp:1)") && tip.contains("60 B") && tip.contains("60.0%") &&
                 tip.contains("3 allocations") && tip.contains("10 B allocated by this frame"),
             qPrintable(tip));
    QCOMPARE(w.sizeHint().height(), 3 * h);

    // What a click does, said where it is true: callers zoom out, callees in.
    w.zoomTo({0});
    QVERIFY(w.tooltipFor({}).contains("zoom out"));
    QVERIFY(w.tooltipFor({0, 0}).contains("zoom in"));
    QVERIFY(!w.tooltipFor({0}).contains("Click"));
  }

  // Frames under a pixel wide are not drawn, so they are not hit either.
  void subPixelFramesAreNeitherDrawnNorHit() {
    FlameNode root;
    root.children.push_back(leaf("big (b.cpp:1)", 1000));
    for (int i = 0; i < 500; ++i) root.children.push_back(leaf("tiny (t.cpp:1)", 1));
    root.bytes = 1500;
    FlameWidget w;
    w.resize(400, 100);
    w.setTree(root, "x");
    const double big = w.rectOf({0}).width();
    QVERIFY(std::abs(big - 400.0 * 1000 / 1500) < 1e-9);
    QCOMPARE(w.rectOf({250}), QRectF());
    QCOMPARE(w.pathAt({big + 50, 1.5 * FlameWidget::kRowHeight}), std::nullopt);
    QCOMPARE(w.pathAt({big - 1, 1.5 * FlameWidget::kRowHeight}), std::optional<Path>(Path{0}));
  }

  // A recording whose stacks are deeper than it keeps: the cut stacks hang from one frame that
  // says so, not from their outermost recorded frames passed off as roots.
  void stacksCutShortHangFromOneFrame() {
    // Deep enough (in every build, sanitized ones with less inlining included): none cut.
    TraceDataPtr deep = record("deep.db", "64");
    QVERIFY(deep);
    QVERIFY(!contains_frame(deep->flame_peak.at(0), "(stacks cut at"));
    TraceDataPtr data = record("shallow.db", "8");
    QVERIFY(data);
    const FlameNode& peak = data->flame_peak.at(0);
    QCOMPARE(peak.bytes, data->peaks[0]->bytes);
    QVERIFY(check_sums(peak) > 1);
    const FlameNode* cut = nullptr;
    for (const FlameNode& c : peak.children)
      if (c.frame == "(stacks cut at 8 frames)") cut = &c;
    QVERIFY(cut);
    QVERIFY2(cut->bytes * 2 > peak.bytes, "most of the peak's stacks are deeper than 8 frames");
    FlameWidget w;
    w.resize(800, 400);
    w.setTree(peak, "x");
    for (size_t i = 0; i < peak.children.size(); ++i)
      if (&peak.children[i] == cut) QVERIFY(w.tooltipFor({i}).contains("--stacks"));
  }

  // An injected CUDA program's trace has segments but no blocks: its first graph is reserved
  // memory by the stacks of its cudaMalloc calls.
  void aSegmentsOnlyTraceShowsReservedMemory() {
    namespace ev = tidemark::events;
    namespace st = tidemark::store;
    const std::string path = (test_dir() + "/segments-only.db").toStdString();
    for (const char* suffix : {"", "-wal", "-shm"})
      QFile::remove(QString::fromStdString(path) + suffix);
    st::TraceMeta meta;
    meta.command_line = "python train.py";
    meta.start_ts_ns = 1000;
    meta.stack_depth = 16;
    const ev::DeviceId cuda{ev::DeviceType::cuda, 0};
    meta.devices = {{cuda, "cuda:0", 0}};
    auto w = st::TraceWriter::create(path, meta);
    w->add_stack_node(1, 0, 0x100);  // main
    w->add_stack_node(2, 1, 0x200);  // main -> load
    w->add_stack_node(3, 1, 0x300);  // main -> train
    uint64_t seq = 0;
    auto segment = [&](uint64_t addr, uint64_t size, uint64_t stack) {
      ev::Event e;
      e.kind = ev::Kind::segment_alloc;
      e.seq = ++seq;
      e.ts_ns = 1000 + seq;
      e.device = cuda;
      e.block = {addr, size, 0, 0, addr, ev::Pool::large, ev::Category::unknown};
      w->append(e, stack);
    };
    segment(0x7f0000000000, 2 << 20, 2);
    segment(0x7f0000200000, 20 << 20, 3);
    segment(0x7f0001600000, 20 << 20, 3);
    w->close(2000);
    w.reset();
    st::FinalizeOptions opt;
    opt.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
      const char* name = ip == 0x100 ? "main" : ip == 0x200 ? "load" : "train";
      return {{name, "t.cpp", static_cast<int>(ip >> 8), false, "/bin/t"}};
    };
    st::finalize(path, opt);
    QString error;
    TraceDataPtr data = TraceLoader::load_now(QString::fromStdString(path), &error);
    QVERIFY2(data, qPrintable(error));
    FlamePage page;
    page.setData(data);
    QVERIFY(page.choice()->count() >= 1);
    QVERIFY2(page.choice()->itemText(0).startsWith("cuda:0: reserved at the reserved peak"),
             qPrintable(page.choice()->itemText(0)));
    const FlameNode& t = page.flame()->tree();
    QCOMPARE(t.bytes, int64_t{42} << 20);
    QCOMPARE(t.children.size(), size_t(1));
    QCOMPARE(QString::fromStdString(t.children[0].frame), QString("main (t.cpp)"));
    QCOMPARE(QString::fromStdString(t.children[0].children[0].frame), QString("train (t.cpp)"));
    QCOMPARE(t.children[0].children[0].bytes, int64_t{40} << 20);
    QCOMPARE(t.children[0].children[0].count, uint64_t{2});
  }

  void clickZoomsInAndOut() {
    FlameWidget w;
    w.resize(400, 200);
    w.setTree(hand_tree(), "x");
    QSignalSpy zoomed(&w, &FlameWidget::zoomChanged);
    QTest::mouseClick(&w, Qt::LeftButton, {}, w.rectOf({0}).center().toPoint());
    QCOMPARE(w.zoomed(), Path{0});
    QCOMPARE(zoomed.count(), 1);
    // a fills the width, its callers stay above, b is not drawn.
    QCOMPARE(w.rectOf({0}), QRectF(0, FlameWidget::kRowHeight, 400, FlameWidget::kRowHeight));
    QCOMPARE(w.rectOf({0, 0}).width(), 200.0);
    QCOMPARE(w.rectOf({1}), QRectF());
    QTest::mouseClick(&w, Qt::LeftButton, {}, w.rectOf({0, 1}).center().toPoint());
    QCOMPARE(w.zoomed(), (Path{0, 1}));
    QTest::keyClick(&w, Qt::Key_Escape);
    QCOMPARE(w.zoomed(), Path{0});
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(5, 5));  // "all"
    QCOMPARE(w.zoomed(), Path{});
    w.zoomTo({0, 7, 3});  // no such callee: as far as the path leads
    QCOMPARE(w.zoomed(), Path{0});
  }

  // A click on a fold expands it into exactly its frames, as wide as it was; a click on one of
  // them folds them again; the zoom follows the levels the run adds and removes.
  void clickExpandsAFoldAndFoldsItAgain() {
    FlameWidget w;
    w.resize(300, 300);
    w.setTree(folded_tree(), "x");
    const Path fold{0, 0, 0};  // all > main > step > the fold
    QCOMPARE(QString::fromStdString(w.node(fold)->frame), QString("… 5 library frames (L1 …)"));
    QCOMPARE(w.node(fold)->bytes, int64_t{150});
    QCOMPARE(w.node(fold)->folded.size(), size_t(5));
    const QRectF fold_rect = w.rectOf(fold);
    QCOMPARE(fold_rect, QRectF(0, 3 * FlameWidget::kRowHeight, 300, FlameWidget::kRowHeight));
    const QString tip = w.tooltipFor(fold);
    QVERIFY2(tip.contains("L1 (l.cpp)\n  L2 (l.cpp)") && tip.contains("L5 (l.cpp)") &&
                 tip.contains("Click to expand") && !tip.contains("zoom"),
             qPrintable(tip));
    QCOMPARE(w.sizeHint().height(), 6 * FlameWidget::kRowHeight);  // all main step fold hook fold

    QSignalSpy toggled(&w, &FlameWidget::foldToggled);
    QTest::mouseClick(&w, Qt::LeftButton, {}, fold_rect.center().toPoint());
    QCOMPARE(toggled.count(), 1);
    QCOMPARE(w.zoomed(), Path{});  // a click on a fold expands it, never zooms
    Path p = fold;
    for (int k = 1; k <= 5; ++k) {  // the run's frames, outermost first, each as wide as the fold
      const FlameNode* n = w.node(p);
      QVERIFY(n);
      QCOMPARE(QString::fromStdString(n->frame), QString("L%1 (l.cpp)").arg(k));
      QCOMPARE(n->bytes, int64_t{150});
      QCOMPARE(n->count, uint64_t{3});
      QVERIFY(n->folded.empty());
      QCOMPARE(w.rectOf(p),
               QRectF(0, double(p.size()) * FlameWidget::kRowHeight, 300, FlameWidget::kRowHeight));
      QCOMPARE(n->children.size(), size_t(k < 5 ? 1 : 2));
      if (k < 5) p.push_back(0);
    }
    QCOMPARE(QString::fromStdString(w.node(p)->children[0].frame), QString("hook (t.py)"));
    QCOMPARE(QString::fromStdString(w.node(p)->children[1].frame), QString("hook2 (t.py)"));
    QCOMPARE(w.sizeHint().height(), 10 * FlameWidget::kRowHeight);
    QVERIFY(w.tooltipFor({0, 0, 0, 0, 0}).contains("fold it again"));

    // A click on any of them (L3 here) folds the run again.
    QTest::mouseClick(&w, Qt::LeftButton, {}, w.rectOf({0, 0, 0, 0, 0}).center().toPoint());
    QCOMPARE(toggled.count(), 2);
    QCOMPARE(QString::fromStdString(w.node(fold)->frame), QString("… 5 library frames (L1 …)"));
    QCOMPARE(w.node(fold)->folded.size(), size_t(5));
    QCOMPARE(w.node(fold)->bytes, int64_t{150});
    QCOMPARE(w.node(fold)->children.size(), size_t(2));
    QCOMPARE(w.sizeHint().height(), 6 * FlameWidget::kRowHeight);

    // Zoomed on hook, below the fold: expanding the fold (a caller now) keeps hook zoomed.
    w.zoomTo({0, 0, 0, 0});
    QCOMPARE(QString::fromStdString(w.node(w.zoomed())->frame), QString("hook (t.py)"));
    QVERIFY(w.toggleFold(fold));
    QCOMPARE(w.zoomed(), (Path{0, 0, 0, 0, 0, 0, 0, 0}));
    QCOMPARE(QString::fromStdString(w.node(w.zoomed())->frame), QString("hook (t.py)"));
    // Zoomed on L3, then folded again: the zoom is on the fold.
    w.zoomTo({0, 0, 0, 0, 0});
    QVERIFY(w.toggleFold({0, 0, 0, 0, 0, 0}));  // L4
    QCOMPARE(w.zoomed(), fold);
    QVERIFY(!w.toggleFold({0, 0}));  // step: neither a fold nor of one
    QCOMPARE(toggled.count(), 4);
    // The innermost run, a leaf: expanded it is its two frames.
    w.zoomTo({});
    QVERIFY(w.toggleFold({0, 0, 0, 0, 0}));
    QCOMPARE(QString::fromStdString(w.node({0, 0, 0, 0, 0})->frame), QString("La (a.cpp)"));
    QCOMPARE(QString::fromStdString(w.node({0, 0, 0, 0, 0, 0})->frame), QString("Lb (b.cpp)"));
    QCOMPARE(w.node({0, 0, 0, 0, 0, 0})->self_bytes, int64_t{100});

    // All frames: nothing folded, nothing a click folds.
    w.setTree(folded_tree(tidemark::analysis::Frames::all), "x");
    QCOMPARE(folds(w.tree()), 0);
    QCOMPARE(QString::fromStdString(w.node(fold)->frame), QString("L1 (l.cpp)"));
    QVERIFY(!w.toggleFold(fold));
    QTest::mouseClick(&w, Qt::LeftButton, {}, w.rectOf(fold).center().toPoint());
    QCOMPARE(w.zoomed(), fold);  // an ordinary frame: the click zooms
  }

  // On a recording: User frames fold (accumulated_loss's stacks run through tensorlib and the
  // C++ standard library), and the folds hide nothing: expanded, the graph of the peak is the
  // All frames one, stack for stack and byte for byte.
  void foldsOfARecordingHideNothing() {
    const QString path = cli_recorded_trace("loss.db", TIDEMARK_ACCUMULATED_LOSS, {"--steps", "8"});
    QVERIFY(!path.isEmpty());
    QString error;
    TraceDataPtr user = TraceLoader::load_now(path, &error, tidemark::analysis::Frames::user);
    QVERIFY2(user, qPrintable(error));
    TraceDataPtr all = TraceLoader::load_now(path, &error, tidemark::analysis::Frames::all);
    QVERIFY2(all, qPrintable(error));
    QVERIFY(user->frames == tidemark::analysis::Frames::user);
    QVERIFY(all->frames == tidemark::analysis::Frames::all);
    const FlameNode& u = user->flame_peak.at(0);
    const FlameNode& a = all->flame_peak.at(0);
    QVERIFY(folds(u) > 0);
    QCOMPARE(folds(a), 0);
    QCOMPARE(u.bytes, a.bytes);
    QVERIFY(check_sums(u) > 1);
    QVERIFY(u.depth() < a.depth());
    std::map<std::string, int64_t> su, sa;
    flat_stacks(u, "", su);
    flat_stacks(a, "", sa);
    QVERIFY(sa.size() > 1);
    QVERIFY(su == sa);
    // Every folded frame is library code by the trace's own classification.
    std::function<void(const FlameNode&)> check = [&](const FlameNode& n) {
      if (!n.folded.empty()) {
        QVERIFY(n.library && n.folded.size() >= tidemark::analysis::kFoldedRunMin);
        for (const FlameNode& f : n.folded) QVERIFY(f.library);
      }
      for (const FlameNode& c : n.children) check(c);
    };
    check(u);
  }

  void peakOfARecording() {
    const QString path = cli_recorded_trace("loss.db", TIDEMARK_ACCUMULATED_LOSS, {"--steps", "8"});
    QVERIFY(!path.isEmpty());
    QString error;
    TraceDataPtr data = TraceLoader::load_now(path, &error);
    QVERIFY2(data, qPrintable(error));
    QCOMPARE(data->devices.size(), size_t(1));
    QVERIFY(data->peaks[0].has_value());
    const FlameNode& peak = data->flame_peak.at(0);
    QCOMPARE(peak.bytes, data->peaks[0]->bytes);
    QVERIFY(check_sums(peak) > 10);
    QVERIFY(contains_frame(peak, "accumulated_loss.cpp"));

    TraceView view;
    view.showOffscreen({1000, 700}, data);
    view.showView(TraceView::View::flame);
    QCOMPARE(view.tabTitle(TraceView::View::flame), QString("Flame graph"));
    FlamePage* page = view.flamePage();
    QVERIFY(page->choice()->count() >= 1);
    QVERIFY2(page->choice()->itemText(0).startsWith("cpu: live at the allocated peak"),
             qPrintable(page->choice()->itemText(0)));
    QCOMPARE(page->flame()->tree().bytes, data->peaks[0]->bytes);
    QVERIFY(page->flame()->isVisible());
    // The widest tower's frame is under the mouse where it is drawn.
    const QRectF r = page->flame()->rectOf({0});
    QVERIFY(r.width() > 0);
    QCOMPARE(page->flame()->pathAt(r.center()), std::optional<Path>(Path{0}));

    // The segments reserved at the reserved peak, by the stacks that reserved them.
    int reserved = -1;
    for (int i = 0; i < page->choice()->count(); ++i)
      if (page->choice()->itemText(i).contains("reserved at the reserved peak")) reserved = i;
    QVERIFY(reserved > 0);  // after the allocated peak's graph
    page->choice()->setCurrentIndex(reserved);
    const int64_t reserved_peak = data->session->with([&](const tidemark::analysis::Trace& t) {
      return tidemark::analysis::peak(t, data->devices[0].id, tidemark::store::Curve::reserved)
          ->bytes;
    });
    QCOMPARE(page->flame()->tree().bytes, reserved_peak);
    QVERIFY(check_sums(page->flame()->tree()) > 1);
    page->choice()->setCurrentIndex(0);

    // A click on the timeline adds, and shows, the graph of what was live then.
    const uint64_t ts = data->origin_ns + (data->end_ns - data->origin_ns) / 2;
    QSignalSpy shown(&view, &TraceView::stateShown);
    view.selectTime(ts);
    QVERIFY(!shown.isEmpty() || shown.wait(10000));
    const int last = page->choice()->count() - 1;
    QCOMPARE(page->choice()->currentIndex(), last);
    QVERIFY2(page->choice()->itemText(last).contains("the selected time"),
             qPrintable(page->choice()->itemText(last)));
    const int64_t live = data->session->with([&](const tidemark::analysis::Trace& t) {
      return tidemark::analysis::live_at(t, data->devices[0].id, {ts, {}},
                                         tidemark::analysis::GroupBy::site, 0)
          .bytes;
    });
    QVERIFY(live > 0);
    QCOMPARE(page->flame()->tree().bytes, live);
    QVERIFY(check_sums(page->flame()->tree()) > 1);
    page->choice()->setCurrentIndex(0);  // back to the peak
    QCOMPARE(page->flame()->tree().bytes, data->peaks[0]->bytes);

    // Beside the graph, the source view: the sample's file, every line of it, each with what
    // `tidemark top --by line --file` puts on that line at the peak.
    SourceLinesPanel* lines = view.findChild<SourceLinesPanel*>();
    QVERIFY(lines);
    const SourceLines& source_view = lines->shown();
    QVERIFY2(
        QString::fromStdString(source_view.file).endsWith("samples/pitfalls/accumulated_loss.cpp"),
        source_view.file.c_str());
    QVERIFY(source_view.text_read);
    QFile source(QString::fromStdString(source_view.file));
    QVERIFY(source.open(QIODevice::ReadOnly));
    QCOMPARE(qsizetype(source_view.rows.size()), source.readAll().count('\n'));
    QProcess p;
    p.start(TIDEMARK_CLI, {"top", path, "--by", "line", "--file", "accumulated_loss.cpp", "--json",
                           "--limit", "0"});
    QVERIFY(p.waitForFinished(60000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    std::map<int, int64_t> expected;
    int64_t outside = 0;
    for (const QJsonValue g :
         QJsonDocument::fromJson(p.readAllStandardOutput()).object()["groups"].toArray()) {
      const QString key = g.toObject()["key"].toString();
      if (key.startsWith("accumulated_loss.cpp:"))
        expected[key.section(':', 1).toInt()] = g.toObject()["bytes"].toInteger();
      else
        outside += g.toObject()["bytes"].toInteger();
    }
    QVERIFY(expected.size() >= 2);
    int with_bytes = 0;
    for (const SourceLineRow& r : source_view.rows) {
      QCOMPARE(r.bytes, expected.count(r.line) ? expected[r.line] : 0);
      with_bytes += r.bytes > 0;
    }
    QCOMPARE(with_bytes, int(expected.size()));
    QCOMPARE(source_view.outside_bytes, outside);
    QCOMPARE(source_view.peak_bytes, data->peaks[0]->bytes);
    // A file no frame names: nothing on its lines, all of the peak outside it.
    lines->showFile("no_such_model.py");
    QVERIFY(lines->shown().rows.empty());
    QVERIFY(!lines->shown().text_read);
    QCOMPARE(lines->shown().outside_bytes, data->peaks[0]->bytes);
  }
};

QTEST_MAIN(FlameTest)
#include "flame_test.moc"
