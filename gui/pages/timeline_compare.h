// TimelineCompare: a second trace overlaid on a timeline (docs/gui.md, "Compare"): its allocated
// and reserved curves queried for the same pixel columns, its time shifted so both traces start
// together or so their first steps coincide, drawn dashed over this trace's.
#pragma once

#include <QColor>
#include <QPainter>
#include <cstdint>
#include <memory>
#include <vector>

#include "gui/models/trace_loader.h"
#include "gui/pages/timeline_lanes.h"
#include "gui/pages/timeline_layout.h"
#include "profiler/analysis/memory.h"

namespace tidemark::gui {

class TimelineCompare {
 public:
  enum class Align { start, first_step };

  // Overlays `other` (null: none) on `mine`, aligned by `align`.
  void set(TraceDataPtr other, const TraceData* mine, Align align);
  // Aligns again: another alignment, or `mine` changed.
  void align(const TraceData* mine, Align align);

  const TraceDataPtr& other() const { return other_; }
  // The rows its queries read before (one query at a time uses them: AsyncQuery's rule).
  const std::shared_ptr<analysis::TimelineCache>& cache() const { return cache_; }
  Align alignment() const { return align_; }
  // What to add to a time of this trace to get the time of the other shown at the same x.
  int64_t offset() const { return offset_; }
  // The end of the range a view of `mine` covers: its end, or the other's if later.
  uint64_t end(const TraceData* mine) const;

  static QColor color(size_t device);
  // `columns`: the other trace's, per device of this trace (width 0 for a device it lacks).
  void draw(QPainter& p, const TimelineLayout& layout, const RankLanes& lanes,
            const std::vector<analysis::Timeline>& columns) const;

 private:
  TraceDataPtr other_;
  std::shared_ptr<analysis::TimelineCache> cache_;
  Align align_ = Align::start;
  int64_t offset_ = 0;
};

}  // namespace tidemark::gui
