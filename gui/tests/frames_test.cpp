// The toggle between User frames and All frames (Note [Frames in the GUI]): on a recording of
// samples/train_mlp with stacks, every page that names sites -- Live at peak, Leaks, the summary,
// Live in selection, Details, Tensors, the timeline's bands by top site -- names them as a trace of
// the test's own under the same rule does, before and after the toggle; the tables are
// computed again (their tabs say so meanwhile) while the timeline's zoom stays; the flame
// graphs fold library frames under User frames only, Compare's too.
#include <QComboBox>
#include <QSignalSpy>
#include <QTest>
#include <algorithm>
#include <string>
#include <vector>

#include "gui/pages/trace_view.h"
#include "gui/tests/test_traces.h"

using namespace tidemark::gui;
using namespace tidemark::gui::testing;
namespace an = tidemark::analysis;
using an::Frames;

namespace {

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> sites_of(const std::vector<SiteRow>& rows) {
  std::vector<std::string> out;
  for (const SiteRow& r : rows) out.push_back(r.site);
  return sorted(out);
}

int folds(const an::FlameNode& n) {
  int found = n.folded.empty() ? 0 : 1;
  for (const an::FlameNode& c : n.children) found += folds(c);
  return found;
}

}  // namespace

class FramesTest : public QObject {
  Q_OBJECT
  QString path_;

  // The test's own trace under `frames`: what every page should say.
  an::Trace trace(Frames frames) {
    an::Trace t = an::Trace::open(path_.toStdString());
    t.set_frames(frames);
    return t;
  }
  // Live at the allocated peak, by site, on every device with one.
  std::vector<std::string> liveAtPeak(Frames frames) {
    const an::Trace t = trace(frames);
    std::vector<std::string> out;
    for (const an::DeviceRef& d : t.devices())
      if (auto at = an::peak_point(t, d.id))
        for (const an::Group& g :
             an::group_allocations(t, an::live_allocations(t, d.id, *at), an::GroupBy::site, 0))
          out.push_back(g.label);
    return sorted(out);
  }

  // What the view shows under `frames` is what the test's own trace says.
  void checkView(TraceView& view, Frames frames, uint64_t from, uint64_t to) {
    const TraceDataPtr data = view.traceData();
    QVERIFY(data->frames == frames);
    QVERIFY(data->stage == Stage::complete);
    QVERIFY(view.selection()->frames() == frames);
    const an::Trace t = trace(frames);
    QCOMPARE(sites_of(view.liveModel()->rows()), liveAtPeak(frames));
    QCOMPARE(sites_of(data->live_at_peak), liveAtPeak(frames));
    // Leaks (the rows the Leaks tab shows) and the summary's sites at the peak.
    std::vector<std::string> leaked;
    for (const an::Group& g : an::group_allocations(
             t, t.reader().allocations_where("WHERE free_requested_ts IS NULL", {}),
             an::GroupBy::site, 0))
      leaked.push_back(g.label);
    QCOMPARE(sites_of(data->leaks), sorted(leaked));
    QVERIFY(data->summary.top_at_peak.has_value());
    const an::Summary s = an::summarize(t);
    QCOMPARE(data->summary.top_at_peak->groups.size(), s.top_at_peak->groups.size());
    for (size_t i = 0; i < s.top_at_peak->groups.size(); ++i)
      QCOMPARE(data->summary.top_at_peak->groups[i].label, s.top_at_peak->groups[i].label);
    // Live in selection, for the range selected before.
    std::vector<std::string> selected;
    for (const SiteRow& r : live_in_selection(t, from, to)) selected.push_back(r.site);
    QCOMPARE(sites_of(view.selectionModel()->rows()), sorted(selected));
    // The Details of the allocation asked for before.
    QVERIFY(view.details().has_value());
    QCOMPARE(view.details()->site.label, t.site(view.details()->row.stack_id).label);
    // The Tensors live at the allocator's time.
    QVERIFY(view.tensorModel()->rowCount() > 0);
    for (const TensorRow& r : view.tensorModel()->rows())
      QCOMPARE(r.site, t.site(r.info.stack_id).label);
    // The timeline's bands by top site.
    QVERIFY(view.timeline()->bands() && !view.timeline()->bands()->empty());
    const an::Bands bands = an::allocated_bands(t, data->devices[0].id, an::BandBy::site);
    QCOMPARE(view.timeline()->bands()->front()->labels(), bands.labels());
    // The flame graphs fold library frames under User frames only; Compare's too.
    QVERIFY(frames == Frames::user ? folds(data->flame_peak.at(0)) > 0
                                   : folds(data->flame_peak.at(0)) == 0);
    QComboBox* choice = view.flamePage()->choice();
    int grown = -1;
    for (int i = 0; i < choice->count(); ++i)
      if (choice->itemText(i).contains("(red: grew)")) grown = i;
    QVERIFY(grown >= 0);
    choice->setCurrentIndex(grown);
    const an::FlameNode& compared = view.flamePage()->flame()->tree();
    QVERIFY(compared.bytes > 0);
    QVERIFY(frames == Frames::user ? folds(compared) > 0 : folds(compared) == 0);
    choice->setCurrentIndex(0);
  }

 private slots:
  void initTestCase() {
    path_ = recorded_trace(32);
    QVERIFY(!path_.isEmpty());
    // The test means something only if the two rules name different sites.
    QVERIFY(liveAtPeak(Frames::user) != liveAtPeak(Frames::all));
  }

  void everyPageNamesSitesUnderTheViewsRule() {
    TraceView view;
    view.setSynchronous(true);  // the pages' queries answer at once; the loader still runs apart
    view.showOffscreen({1200, 800});
    QSignalSpy loaded(&view, &TraceView::loaded);
    view.load(path_);
    QVERIFY(loaded.wait(120000));
    const TraceDataPtr first = view.traceData();
    QVERIFY(view.selection()->frames() == Frames::user);  // the default
    // What the pages with queries of their own show: a range, an allocation, the tensors at
    // the peak (the allocator page's first query), the bands by site, a comparison.
    const uint64_t from = first->origin_ns + (first->end_ns - first->origin_ns) / 4;
    const uint64_t to = first->origin_ns + (first->end_ns - first->origin_ns) * 3 / 4;
    view.selectRange(from, to);
    const SiteRow& top = first->live_at_peak.front();
    view.showDetails(top.device_id, top.largest_addr, top.largest_alloc_ts);
    view.setStacking(TimelineWidget::Stacking::site);
    QSignalSpy compared(&view, &TraceView::compareShown);
    view.compareWith(path_);
    // The other trace loads apart; its overlay resets the view to cover both when it arrives,
    // so the zoom is set after it.
    QVERIFY(compared.count() > 0 || compared.wait(120000));
    view.selection()->setZoom(from, to);  // as a zoom by the user goes
    const uint64_t zoom_from = view.timeline()->viewFrom(), zoom_to = view.timeline()->viewTo();
    checkView(view, Frames::user, from, to);

    // The tables are computed again under the new rule, on the same session: the snapshot
    // that says so comes first (seen as it arrives: the tables may follow in the same pass of
    // the event loop).
    QString title_meanwhile;
    bool same_session = false;
    const QMetaObject::Connection seen = connect(&view, &TraceView::opened, this, [&] {
      title_meanwhile = view.tabTitle(TraceView::View::live);
      same_session = view.traceData()->session == first->session;
    });
    QSignalSpy reloaded(&view, &TraceView::loaded);
    view.setFrames(Frames::all);
    QVERIFY(reloaded.wait(120000));
    disconnect(seen);
    QVERIFY2(title_meanwhile.contains("computing"), qPrintable(title_meanwhile));
    QVERIFY(same_session);
    QCOMPARE(view.timeline()->viewFrom(), zoom_from);  // the zoom stayed
    QCOMPARE(view.timeline()->viewTo(), zoom_to);
    QCOMPARE(view.tabTitle(TraceView::View::live), QString("Live at peak"));
    checkView(view, Frames::all, from, to);

    // And back.
    view.setFrames(Frames::user);
    QVERIFY(reloaded.wait(120000));
    checkView(view, Frames::user, from, to);
  }

  // A trace opened in a view set to All frames is loaded under it from the start.
  void aViewsRuleHoldsForTheTracesItOpens() {
    TraceView view;
    view.setSynchronous(true);
    view.showOffscreen({1000, 700});
    view.setFrames(Frames::all);
    QSignalSpy loaded(&view, &TraceView::loaded);
    view.load(path_);
    QVERIFY(loaded.wait(120000));
    QVERIFY(view.traceData()->frames == Frames::all);
    QCOMPARE(sites_of(view.liveModel()->rows()), liveAtPeak(Frames::all));
    QTest::qWait(200);
    QCOMPARE(loaded.count(), 1);  // loaded once: nothing computed again
  }
};

QTEST_MAIN(FramesTest)
#include "frames_test.moc"
