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

// The palette slot of each band of each device (labels per device, in band order): a label
// keeps the slot it got where it first appears, devices in order, so a site or a custom category
// has one colour in every lane; the first device's bands take slots 0, 1, 2, ... in order.
std::vector<std::vector<size_t>> band_slots(const std::vector<std::vector<std::string>>& labels);

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
  // A band's colour: a category's own, grey for "unknown" and "other sites", else the palette's
  // colour at `slot` (band_slots).
  static QColor color(Stacking s, size_t slot, const std::string& label);
  // The colour device `device`'s band `band` is drawn in (its label's slot in the current set).
  QColor colorOf(size_t device, size_t band) const;

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
  std::shared_ptr<const BandSet> sets_[3];     // by Stacking, built on first use
  std::vector<std::vector<size_t>> slots_[3];  // band_slots of each set
  std::function<void(Stacking)> built_;
  AsyncQuery<std::pair<Stacking, BandSet>> query_;  // last: it goes first
};

}  // namespace tidemark::gui
