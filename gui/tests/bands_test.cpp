// The timeline stacked by category and by top site, on a recording of
// samples/pitfalls/accumulated_loss (activations kept alive by the summed loss): the bands
// of every column add up to analysis::timeline()'s allocated value there, and each band's
// height is what an independent SQL query over the allocations table gives for its category.
// On a real PyTorch snapshot, imported: the same of its inferred categories, with its inferred
// steps marked, both labelled as inferred.
#include <sqlite3.h>

#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTest>
#include <algorithm>
#include <map>

#include "gui/models/summary_html.h"
#include "gui/models/table_models.h"
#include "gui/models/trace_loader.h"
#include "gui/pages/timeline_widget.h"
#include "gui/tests/test_traces.h"
#include "profiler/analysis/memory.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace an = tidemark::analysis;

namespace {

// Bytes allocated (alloc_ts < end, not free_requested before end) per category.
std::map<std::string, int64_t> bytes_by_category(const QString& path, int64_t device,
                                                 uint64_t end) {
  std::map<std::string, int64_t> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return out;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT category, SUM(size) FROM allocations WHERE device = ? AND "
                     "alloc_ts < ? AND (free_requested_ts IS NULL OR free_requested_ts >= ?) "
                     "GROUP BY category",
                     -1, &st, nullptr);
  sqlite3_bind_int64(st, 1, device);
  sqlite3_bind_int64(st, 2, int64_t(end));
  sqlite3_bind_int64(st, 3, int64_t(end));
  while (sqlite3_step(st) == SQLITE_ROW)
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// `w` showing `data` stacked by `s` at `size`, its queries synchronous, painted once.
QImage show_stacked(TimelineWidget& w, TraceDataPtr data, TimelineWidget::Stacking s,
                    QSize size = {900, 400}) {
  w.setSynchronous(true);
  w.resize(size);
  w.setTraceData(std::move(data));
  w.setStacking(s);
  QImage img(w.size(), QImage::Format_RGB32);
  w.render(&img);
  return img;
}

}  // namespace

class BandsTest : public QObject {
  Q_OBJECT
  QString path_;
  TraceDataPtr data_;
  TraceDataPtr merged_;  // merged_ranks()

  // The MLP as rank 0 and the accumulated loss as rank 1, merged (`tidemark merge`); null after
  // printing why when that fails.
  TraceDataPtr merged_ranks() {
    if (merged_) return merged_;
    const QString mlp = recorded_trace();
    const QString r0 = test_dir() + "/rank-0.db", r1 = test_dir() + "/rank-1.db",
                  merged = test_dir() + "/legend_merged.db";
    for (const QString& f : {r0, r1, merged}) QFile::remove(f);
    if (mlp.isEmpty() || !QFile::copy(mlp, r0) || !QFile::copy(path_, r1)) return nullptr;
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(TIDEMARK_CLI, {"merge", r0, r1, "-o", merged});
    if (!p.waitForFinished(120000) || p.exitCode() != 0) {
      qWarning("merge failed: %s", p.readAll().constData());
      return nullptr;
    }
    QString error;
    merged_ = TraceLoader::load_now(merged, &error);
    if (!merged_) qWarning("%s", qPrintable(error));
    return merged_;
  }

 private slots:
  void initTestCase() {
    path_ = cli_recorded_trace("accumulated_loss.db", TIDEMARK_ACCUMULATED_LOSS, {"--steps", "10"});
    QVERIFY(!path_.isEmpty());
    QString error;
    data_ = TraceLoader::load_now(path_, &error);
    QVERIFY2(data_, qPrintable(error));
  }

  // The Summary names the peak's categories, largest first, as `tidemark summary` does.
  void summarySplitsThePeakByCategory() {
    QVERIFY(data_->summary.categories_at_peak);
    const auto& groups = data_->summary.categories_at_peak->groups;
    QVERIFY(!groups.empty());
    QCOMPARE(QString::fromStdString(groups[0].label), QString("activation"));
    const QString html = summary_html(*data_);
    QVERIFY2(html.contains("By category: activation " + bytes_text(groups[0].bytes)),
             qPrintable(html));
  }

  // The same run as PyTorch would snapshot it (no categories), imported: the importer infers
  // the categories (Note [Inferred categories]) and the Summary says they are inferred; the
  // recorded trace's does not.
  void summarySaysInferredCategoriesAreInferred() {
    QVERIFY2(!summary_html(*data_).contains("inferred"), qPrintable(summary_html(*data_)));
    const QString pickle = test_dir() + "/accumulated_loss.pickle";
    const QString imported = test_dir() + "/accumulated_loss.imported.db";
    for (const QStringList& args :
         {QStringList{"export", path_, "--format", "snapshot", "--no-categories", "-o", pickle},
          QStringList{"import", pickle, "-o", imported}}) {
      QProcess p;
      p.setProcessChannelMode(QProcess::MergedChannels);
      p.start(TIDEMARK_CLI, args);
      QVERIFY(p.waitForFinished(120000));
      QVERIFY2(p.exitCode() == 0, p.readAll().constData());
    }
    QString error;
    TraceDataPtr data = TraceLoader::load_now(imported, &error);
    QVERIFY2(data, qPrintable(error));
    QVERIFY(data->summary.categories_at_peak);
    QVERIFY(!data->summary.categories_inferred.empty());
    const QString html = summary_html(*data);
    QVERIFY2(html.contains("Categories inferred, not recorded: from frames and lifetimes"),
             qPrintable(html));
  }

  void categoryBandsAddUpToTheAllocatedCurve() {
    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(900, 400);
    w.setTraceData(data_);
    QSignalSpy ready(&w, &TimelineWidget::bandsReady);
    w.setStacking(TimelineWidget::Stacking::category);
    QCOMPARE(ready.count(), 1);
    // Zoomed into the middle half, so columns are narrower than the whole trace.
    const uint64_t span = w.viewTo() - w.viewFrom();
    w.setView(w.viewFrom() + span / 4, w.viewFrom() + 3 * span / 4);
    QImage img(w.size(), QImage::Format_RGB32);
    w.render(&img);
    QCOMPARE(w.bandColumns().size(), data_->devices.size());
    const an::BandColumns& bc = w.bandColumns()[0];
    const an::Bands& bands = *w.bands()->at(0);
    QVERIFY(bands.size() >= 2);  // activations (saved for backward) and the rest
    const int64_t dev = data_->devices[0].id;
    an::Timeline tl = data_->session->with([&](const an::Trace& trace) {
      return an::timeline(trace, dev, {bc.from_ts, bc.to_ts, bc.width()});
    });
    QCOMPARE(tl.width(), bc.width());
    bool saw_activations = false;
    for (size_t col = 0; col < bc.width(); ++col) {
      int64_t sum = 0;
      for (size_t b = 0; b < bands.size(); ++b) sum += bc.values[b][col];
      QCOMPARE(sum, tl.allocated.last[col]);
    }
    // Sampled columns against SQL: each band is its category's bytes at the column's end.
    for (size_t col = 0; col < bc.width(); col += bc.width() / 17) {
      // The instant a column's `last` describes: its end, or the end of the last level-of-detail
      // bucket starting in it (Bands::columns).
      uint64_t end = col + 1 == bc.width() ? bc.to_ts : bc.from_ts + (col + 1) * bc.column_ns;
      const uint64_t w = tl.level_width_ns;
      if (w > 1) end = (end - 1) / w * w + w;
      const auto expected = bytes_by_category(path_, dev, end);
      for (size_t b = 0; b < bands.size(); ++b) {
        auto it = expected.find(bands.labels()[b]);
        QCOMPARE(bc.values[b][col], it == expected.end() ? 0 : it->second);
        saw_activations |= bands.labels()[b] == "activation" && bc.values[b][col] > 0;
      }
    }
    QVERIFY(saw_activations);
    // The activation band is painted: the pixel at its middle in its tallest column is not
    // the background.
    size_t pb = 0;
    while (bands.labels()[pb] != "activation") ++pb;
    const size_t col = size_t(std::max_element(bc.values[pb].begin(), bc.values[pb].end()) -
                              bc.values[pb].begin());
    int64_t below = 0;
    for (size_t b = 0; b < pb; ++b) below += bc.values[b][col];
    const int64_t v = bc.values[pb][col];
    QVERIFY(w.valueToY(below) - w.valueToY(below + v) >= 3);
    const int y = (w.valueToY(below) + w.valueToY(below + v)) / 2;
    const QColor c = img.pixelColor(int(w.tsToX(bc.from_ts + col * bc.column_ns)), y);
    QVERIFY2(c != QColor(Qt::white), qPrintable(c.name()));
  }

  // A real PyTorch snapshot (tests/data/pytorch: a Transformer trained for 3 iterations),
  // imported: the importer infers its categories and steps (Note [Inferred categories]); the
  // timeline stacks the allocated curve by those categories, each band what SQL gives for it,
  // marks the 3 steps, and says both were inferred. A recorded trace says neither.
  void anImportedSnapshotStacksByItsInferredCategories() {
    const QString pickle =
        QFileInfo(QString(__FILE__)).absolutePath() +
        "/../../tests/data/pytorch/niu_forward_and_backward_memory_snapshot_200.pickle";
    QVERIFY2(QFileInfo::exists(pickle), qPrintable(pickle));
    const QString imported = test_dir() + "/niu.imported.db";
    for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(imported + suffix);
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(TIDEMARK_CLI, {"import", pickle, "-o", imported});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAll().constData());
    QString error;
    TraceDataPtr data = TraceLoader::load_now(imported, &error);
    QVERIFY2(data, qPrintable(error));
    QVERIFY(data->imported);
    QVERIFY2(!data->categories_inferred.empty(), "the importer inferred the categories");
    QVERIFY2(!data->steps_inferred.empty(), "and the steps");
    QCOMPARE(data->steps.size(), size_t(3));

    TimelineWidget w;
    w.setSynchronous(true);
    w.resize(1000, 420);
    w.setTraceData(data);
    QVERIFY(w.inferredCategoriesNote().isEmpty());  // unstacked: no categories shown
    QCOMPARE(w.inferredStepsNote(),
             "steps inferred from " + QString::fromStdString(data->steps_inferred));
    w.setStacking(TimelineWidget::Stacking::category);
    QCOMPARE(w.inferredCategoriesNote(), QString("categories inferred, not recorded"));
    QImage img(w.size(), QImage::Format_RGB32);
    w.render(&img);
    // Several devices may have been snapshotted; the one with the highest peak.
    size_t d = 0;
    for (size_t i = 0; i < data->devices.size(); ++i)
      if (data->peaks[i] && (!data->peaks[d] || data->peaks[i]->bytes > data->peaks[d]->bytes))
        d = i;
    QVERIFY(d < w.bandColumns().size());
    const an::BandColumns& bc = w.bandColumns()[d];
    const an::Bands& bands = *w.bands()->at(d);
    std::vector<std::string> labels = bands.labels();
    for (const std::string& l : labels)
      QVERIFY2(l == "parameter" || l == "gradient" || l == "optimizer_state" || l == "activation" ||
                   l == "input" || l == "temporary" || l == "unknown",
               l.c_str());
    for (const char* inferred : {"parameter", "gradient", "optimizer_state", "activation"})
      QVERIFY2(std::find(labels.begin(), labels.end(), inferred) != labels.end(), inferred);
    const int64_t dev = data->devices[d].id;
    an::Timeline tl = data->session->with([&](const an::Trace& trace) {
      return an::timeline(trace, dev, {bc.from_ts, bc.to_ts, bc.width()});
    });
    QCOMPARE(tl.width(), bc.width());
    for (size_t col = 0; col < bc.width(); ++col) {
      int64_t sum = 0;
      for (size_t b = 0; b < bands.size(); ++b) sum += bc.values[b][col];
      QCOMPARE(sum, tl.allocated.last[col]);
    }
    for (size_t col = 0; col < bc.width(); col += bc.width() / 13) {
      uint64_t end = col + 1 == bc.width() ? bc.to_ts : bc.from_ts + (col + 1) * bc.column_ns;
      const uint64_t lw = tl.level_width_ns;
      if (lw > 1) end = (end - 1) / lw * lw + lw;
      const auto expected = bytes_by_category(imported, dev, end);
      for (size_t b = 0; b < bands.size(); ++b) {
        auto it = expected.find(bands.labels()[b]);
        QCOMPARE(bc.values[b][col], it == expected.end() ? 0 : it->second);
      }
    }
    // The steps are marked where the trace has them.
    for (const auto& [number, ts] : data->steps) {
      QVERIFY(ts >= w.viewFrom() && ts <= w.viewTo());
      QVERIFY(w.plotRect().contains(int(w.tsToX(ts)), w.plotRect().center().y()));
    }

    // A recorded trace's categories and steps are what the program said: no such label.
    TimelineWidget recorded;
    recorded.setSynchronous(true);
    recorded.resize(900, 400);
    recorded.setTraceData(data_);
    recorded.setStacking(TimelineWidget::Stacking::category);
    QVERIFY(!data_->steps.empty());
    QVERIFY(recorded.inferredCategoriesNote().isEmpty());
    QVERIFY(recorded.inferredStepsNote().isEmpty());
  }

  // Custom categories (Note [Category rules]): with --categories' rules the category bands are
  // the rules' names, holding at the peak what `tidemark top --by category --categories` says
  // each holds there; the legend and the Summary name the rules file.
  void customCategoriesAreTheCommandsAtThePeak() {
    const QString rules = test_dir() + "/rules.json";
    {
      QFile f(rules);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"loop": "accumulated_loss\\.cpp", "rest": "elsewhere"})");
    }
    QProcess p;
    p.start(TIDEMARK_CLI,
            {"top", path_, "--by", "category", "--categories", rules, "--json", "--limit", "0"});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    const QJsonObject top = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    std::map<std::string, int64_t> expected;
    for (const QJsonValue g : top["groups"].toArray())
      expected[g.toObject()["key"].toString().toStdString()] = g.toObject()["bytes"].toInteger();
    QVERIFY2(expected.count("loop"), qPrintable(QJsonDocument(top).toJson()));

    set_category_rules_file(rules.toStdString());
    QString error;
    TraceDataPtr data = TraceLoader::load_now(path_, &error);
    set_category_rules_file({});
    QVERIFY2(data, qPrintable(error));
    QVERIFY(data->category_rules);
    TimelineWidget w;
    show_stacked(w, data, TimelineWidget::Stacking::category);
    const an::Bands& bands = *w.bands()->at(0);
    const auto at_peak = bands.at(data->peaks[0]->ts_ns);
    int64_t total = 0;
    for (size_t b = 0; b < bands.size(); ++b) {
      const std::string& label = bands.labels()[b];
      QVERIFY2(label == "loop" || label == "elsewhere", label.c_str());
      QCOMPARE(at_peak[b], expected.count(label) ? expected[label] : 0);
      total += at_peak[b];
    }
    QCOMPARE(total, int64_t(top["bytes"].toInteger()));
    QCOMPARE(w.categoriesNote(), QString("categories: rules of rules.json"));
    QVERIFY(w.inferredCategoriesNote().isEmpty());
    QVERIFY2(summary_html(*data).contains("Categories by the rules of " + rules),
             qPrintable(summary_html(*data)));
    QVERIFY(!data_->category_rules);  // loaded before: its own categories
  }

  void siteBandsAreTheTopSitesAtThePeak() {
    TimelineWidget w;
    show_stacked(w, data_, TimelineWidget::Stacking::site);
    const an::Bands& bands = *w.bands()->at(0);
    const int64_t dev = data_->devices[0].id;
    const auto groups = data_->session->with([&](const an::Trace& trace) {
      const auto live = an::live_allocations(trace, dev, *an::peak_point(trace, dev));
      return an::group_allocations(trace, live, an::GroupBy::site, 8);
    });
    QCOMPARE(bands.size(), groups.size() + 1);
    for (size_t i = 0; i < groups.size(); ++i) QCOMPARE(bands.labels()[i], groups[i].label);
    QCOMPARE(bands.labels().back(), std::string("other sites"));
    // At the peak, each site band holds that site's bytes.
    const auto at_peak = bands.at(data_->peaks[0]->ts_ns);
    for (size_t i = 0; i < groups.size(); ++i) QCOMPARE(at_peak[i], groups[i].bytes);
    // Back to one colour: no bands queried.
    w.setStacking(TimelineWidget::Stacking::none);
    QVERIFY(w.bandColumns().empty());
  }

  // Note [Rank lanes]: in a merged trace each lane's legend names its own devices' bands. The
  // MLP as rank 0 and the accumulated loss as rank 1: rank 1's activations are named in rank 1's
  // lane, its box drawn there, whatever rank 0's bands are.
  void eachLaneNamesItsOwnBands() {
    TraceDataPtr data = merged_ranks();
    QVERIFY(data);
    TimelineWidget w;
    const QImage img = show_stacked(w, data, TimelineWidget::Stacking::category, {1000, 500});
    QCOMPARE(w.laneCount(), 2);
    const auto& set = *w.bands();
    for (int lane = 0; lane < 2; ++lane) {
      // Exactly the bands of the lane's devices, label and colour, each once.
      std::vector<std::pair<std::string, QColor>> want;
      for (size_t d = 0; d < set.size(); ++d) {
        if (w.laneOf(d) != lane) continue;
        for (size_t b = 0; b < set[d]->size(); ++b) {
          std::pair<std::string, QColor> e{
              set[d]->labels()[b], TimelineWidget::bandColor(TimelineWidget::Stacking::category, b,
                                                             set[d]->labels()[b])};
          if (std::find(want.begin(), want.end(), e) == want.end()) want.push_back(e);
        }
      }
      QVERIFY(!want.empty());
      QVERIFY(w.legendEntries(lane) == want);
    }
    const auto entries = w.legendEntries(1);
    const auto act = std::find_if(entries.begin(), entries.end(),
                                  [](const auto& e) { return e.first == "activation"; });
    QVERIFY(act != entries.end());
    // Its swatch, in rank 1's lane: the box's top left is 6 px into the lane, the swatch 4 px
    // into the box, a row of the font's height and 2 px per entry.
    const int row = w.fontMetrics().height() + 2;
    const QRect lane = w.laneRect(1);
    const QPoint swatch(lane.left() + 6 + 4 + 5,
                        lane.top() + 6 + 3 + row * int(act - entries.begin()) + row / 2);
    QCOMPARE(QColor(img.pixel(swatch)), act->second);
  }

  // A label keeps the palette slot it first took, devices in order, so one site (or custom
  // category) is one colour in every lane; the first device's bands take 0, 1, 2, ...
  void aLabelKeepsItsSlotInEveryDevice() {
    const std::vector<std::vector<size_t>> want = {{0, 1, 2}, {1, 3, 2}, {3, 0}};
    QCOMPARE(band_slots({{"a", "b", "other sites"}, {"b", "c", "other sites"}, {"c", "a"}}), want);
    QVERIFY(band_slots({}).empty());
    // Drawn so: in the merged trace stacked by site, two bands share a colour exactly when they
    // share a site, in the same lane or not (fewer sites than the palette's 9 colours; "other
    // sites" is grey in both lanes).
    TraceDataPtr data = merged_ranks();
    QVERIFY(data);
    TimelineWidget w;
    show_stacked(w, data, TimelineWidget::Stacking::site, {1000, 500});
    const auto& set = *w.bands();
    QCOMPARE(set.size(), size_t(2));
    std::vector<std::pair<std::string, QColor>> drawn;
    for (size_t d = 0; d < set.size(); ++d)
      for (size_t b = 0; b < set[d]->size(); ++b)
        drawn.emplace_back(set[d]->labels()[b], w.bandColorOf(d, b));
    QVERIFY(drawn.size() <= 10);
    for (const auto& [label, colour] : drawn)
      for (const auto& [other, other_colour] : drawn)
        QVERIFY2((label == other) == (colour == other_colour),
                 qPrintable(QString::fromStdString(label + " / " + other)));
  }
};

QTEST_MAIN(BandsTest)
#include "bands_test.moc"
