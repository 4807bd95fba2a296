// ViewSelection: what one TraceView shows and where the user is in it, shared by the timeline
// and every page (trace_view.h). A page that changes it calls a setter; the pages that care
// observe its signals, so no page knows another. It holds:
// * the trace: the latest TraceData (a later stage of the same trace, or a new one);
// * the selected time (a click on the timeline; none: the allocator shows the peak) and the
//   state of the allocator at the time the allocator page shows (its query's answer);
// * the selected range (shift+drag), the highlighted span (a table row, a block's lifetime)
//   and the timeline's visible range (its zoom);
// * what the Details page is asked to show: an allocation or a tensor.
#pragma once

#include <QObject>
#include <memory>
#include <optional>
#include <utility>

#include "gui/core/trace_loader.h"

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

 private:
  TraceDataPtr data_;
  std::optional<uint64_t> time_;
  std::shared_ptr<const StateAtTime> state_;
  std::optional<Span> range_, zoom_;
};

}  // namespace tidemark::gui
