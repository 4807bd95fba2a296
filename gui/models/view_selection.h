// ViewSelection: what one TraceView shows and where the user is in it, shared by the timeline
// and every page (trace_view.h). A page that changes it calls a setter; the pages that care
// observe its signals, so no page knows another. It holds:
// * the trace: the latest TraceData (a later stage of the same trace, or a new one);
// * the selected time (a click on the timeline; none: the allocator shows the peak) and the
//   state of the allocator at the time the allocator page shows (its query's answer);
// * the selected range (shift+drag), the highlighted span (a table row, a block's lifetime)
//   and the timeline's visible range (its zoom);
// * what the Details page is asked to show: an allocation or a tensor;
// * which frames name a site: the user's or any (Note [Frames in the GUI]);
// * Compare's results: the trace compared with this one (the timeline overlays its curves)
//   and the differential flame graphs of the two (the flame page offers them).
//
// Note [Frames in the GUI]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The rule that names a site (analysis::Frames, Note [Allocation site]: the user's own frame,
// or the innermost of any; the CLI's `--frames user|all`) is one choice per view, held here
// and kept when the view opens another trace; the flame graphs fold runs of library frames
// under Frames::user (Note [Folded library frames]). Every answer that names a site or draws
// a flame graph is computed under it:
// * the loader's tables and findings (TraceData::frames says under which rule): a change runs
//   those stages again on the same session (TraceLoader::reload), so the timeline, its zoom
//   and the selections stay while the pages say "computing…";
// * every query of a page or the timeline that names sites captures frames() when it is asked
//   and runs through with_frames() (trace_data.h), which sets the rule on the trace it reads
//   under the session's lock. Those pages ask again on framesChanged(): the allocator state
//   (the Tensors' sites, the flame graph of the selected time), the Details, Live in
//   selection, Compare's differences and flame graphs, the timeline's bands by top site.
#pragma once

#include <QObject>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gui/models/trace_loader.h"

namespace tidemark::gui {

using Span = std::pair<uint64_t, uint64_t>;  // absolute times [from, to)

class ViewSelection : public QObject {
  Q_OBJECT
 public:
  explicit ViewSelection(QObject* parent = nullptr) : QObject(parent) {}

  const TraceDataPtr& data() const { return data_; }
  // The time chosen on the timeline since the trace was opened, if any.
  std::optional<uint64_t> selectedTime() const { return time_; }
  std::shared_ptr<const StateAtTime> state() const { return state_; }
  std::optional<Span> range() const { return range_; }
  std::optional<Span> zoom() const { return zoom_; }
  analysis::Frames frames() const { return frames_; }
  const TraceDataPtr& compared() const { return compared_; }
  const std::vector<FlameDiff>& flameDiffs() const { return flame_diffs_; }

  // Each setter, then the signal it emits (Q_SIGNAL: the pairs stay together).
  // A new trace clears the selections; a later stage of the same trace keeps them. `same`: a
  // later stage of the trace shown before (trace_data.h, same_trace).
  void setData(TraceDataPtr data);
  Q_SIGNAL void dataChanged(const tidemark::gui::TraceDataPtr& data, bool same);
  void selectTime(uint64_t ts);
  Q_SIGNAL void timeSelected(quint64 ts);
  void setState(std::shared_ptr<const StateAtTime> state);
  Q_SIGNAL void stateChanged();  // state() is the allocator's state at a newly shown time
  void selectRange(uint64_t from, uint64_t to);
  Q_SIGNAL void rangeSelected(quint64 from, quint64 to);
  void highlight(uint64_t from, uint64_t to);
  Q_SIGNAL void highlighted(quint64 from, quint64 to);
  void setZoom(uint64_t from, uint64_t to);  // no signal when the range is the same
  Q_SIGNAL void zoomed(quint64 from, quint64 to);
  void showAllocation(int64_t device, uint64_t addr, uint64_t alloc_ts);
  Q_SIGNAL void allocationChosen(qint64 device, quint64 addr, quint64 alloc_ts);
  void showTensor(uint64_t tensor_id);
  Q_SIGNAL void tensorChosen(quint64 tensor_id);
  void setFrames(analysis::Frames frames);  // no signal when it is the rule already
  Q_SIGNAL void framesChanged();
  // A trace opened to compare with this one; its differences with it come later.
  void setCompared(TraceDataPtr other);
  Q_SIGNAL void comparedChanged(const tidemark::gui::TraceDataPtr& other);
  void setFlameDiffs(std::vector<FlameDiff> diffs);
  Q_SIGNAL void flameDiffsChanged();  // flameDiffs() holds the new ones

 private:
  TraceDataPtr data_;
  std::optional<uint64_t> time_;
  std::shared_ptr<const StateAtTime> state_;
  std::optional<Span> range_, zoom_;
  analysis::Frames frames_ = analysis::Frames::user;
  TraceDataPtr compared_;
  std::vector<FlameDiff> flame_diffs_;
};

}  // namespace tidemark::gui
