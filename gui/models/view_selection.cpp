#include "gui/models/view_selection.h"

namespace tidemark::gui {

void ViewSelection::setData(TraceDataPtr data) {
  const bool same = same_trace(data_.get(), data.get());
  data_ = std::move(data);
  if (!same) {
    time_.reset();
    state_.reset();
    range_.reset();
    zoom_.reset();
  }
  emit dataChanged(data_, same);
}

void ViewSelection::selectTime(uint64_t ts) {
  time_ = ts;
  emit timeSelected(ts);
}

void ViewSelection::setState(std::shared_ptr<const StateAtTime> state) {
  state_ = std::move(state);
  emit stateChanged();
}

void ViewSelection::selectRange(uint64_t from, uint64_t to) {
  range_ = Span{from, to};
  emit rangeSelected(from, to);
}

void ViewSelection::highlight(uint64_t from, uint64_t to) {
  emit highlighted(from, to);
}

void ViewSelection::setZoom(uint64_t from, uint64_t to) {
  if (zoom_ == Span{from, to}) return;  // the timeline and the model tell each other
  zoom_ = Span{from, to};
  emit zoomed(from, to);
}

void ViewSelection::showAllocation(int64_t device, uint64_t addr, uint64_t alloc_ts) {
  emit allocationChosen(device, addr, alloc_ts);
}

void ViewSelection::showTensor(uint64_t tensor_id) {
  emit tensorChosen(tensor_id);
}

void ViewSelection::setFrames(analysis::Frames frames) {
  if (frames == frames_) return;
  frames_ = frames;
  emit framesChanged();
}

void ViewSelection::setCompared(TraceDataPtr other) {
  compared_ = std::move(other);
  emit comparedChanged(compared_);
}

void ViewSelection::setFlameDiffs(std::vector<FlameDiff> diffs) {
  flame_diffs_ = std::move(diffs);
  emit flameDiffsChanged();
}

}  // namespace tidemark::gui
