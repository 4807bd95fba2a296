// TimelineBands: what fills a timeline's allocated area when it is stacked -- bands by category
// or by top site (analysis::allocated_bands). The bands of a stacking are built once per trace
// in the thread pool, on a connection of their own (one pass over the allocations: seconds on
// 10M events), so the zoom queries never wait for them; each query of the curves then takes
// their columns (analysis::Bands::columns), which this draws between the reserved area and the
// curves' lines, with a legend and a tooltip naming the band under the cursor.
#pragma once

#include <QColor>
#include <QPainter>
#include <QString>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gui/models/async_query.h"
#include "gui/models/trace_loader.h"
#include "gui/pages/timeline_lanes.h"
#include "gui/pages/timeline_layout.h"
#include "profiler/analysis/bands.h"

namespace tidemark::gui {

class TimelineBands {
 public:
  enum class Stacking { none, category, site };
  using BandSet = std::vector<std::shared_ptr<const analysis::Bands>>;  // per device

  // `built(s)`: the bands of stacking `s` arrived, on the GUI thread.
  TimelineBands(QueryModePtr mode, std::function<void(Stacking)> built);

  // Another trace: the bands of the one before are dropped (one still building too).
  void setTrace(TraceDataPtr data);
  // The same trace under another rule for sites (Note [Frames in the GUI]): its site bands are
  // built again.
  void refolded();
  // Stacks by `s`; false while its bands are still to come (built() says when).
  bool setStacking(Stacking s);
  Stacking stacking() const { return stacking_; }
  // The current stacking's bands, per device; null when unstacked or not built yet.
  std::shared_ptr<const BandSet> current() const { return sets_[int(stacking_)]; }
  static QColor color(Stacking s, size_t band, const std::string& label);

  // What the bands say was inferred rather than recorded (an imported PyTorch snapshot: Note
  // [Inferred categories] in the importer); empty when recorded or not stacked by category.
  QString inferredCategoriesNote() const;
  // The legend's title when stacked by category: the custom categories' rules file (Note
  // [Category rules]), else inferredCategoriesNote().
  QString categoriesNote() const;

  // Drawing, from the columns the last query took (`columns`: per device).
  void draw(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes, size_t device,
            const std::vector<analysis::BandColumns>& columns) const;
  void drawLegend(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes,
                  const std::vector<analysis::BandColumns>& columns) const;
  // What a lane's legend names: the bands of the lane's devices, each label and colour once, in
  // device then band order.
  std::vector<std::pair<std::string, QColor>> legendEntries(const RankLanes& lanes, int lane) const;
  QString tooltip(const QPoint& pos, const TimelineLayout& layout, const RankLanes& lanes,
                  const std::vector<analysis::BandColumns>& columns) const;

 private:
  static BandSet build(const TraceData& data, Stacking s);

  TraceDataPtr data_;
  Stacking stacking_ = Stacking::none;
  std::shared_ptr<const BandSet> sets_[3];  // by Stacking, built on first use
  std::function<void(Stacking)> built_;
  AsyncQuery<std::pair<Stacking, BandSet>> query_;  // last: it goes first
};

}  // namespace tidemark::gui
