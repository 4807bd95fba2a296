// TimelineLayout: where the timeline's parts lie in a widget of a given size -- the plot and its
// rank lanes, the scope lane and the sync lane under it, the margins for the axes' labels -- and
// the scales between times and x, bytes and y. A plain value: the widget makes one from its
// size, its view and its trace, and the curves, bands, overlays, markers and tooltips all place
// what they draw through it.
#pragma once

#include <QRect>
#include <QSize>
#include <cstdint>

namespace tidemark::gui {

struct TimelineLayout {
  static constexpr int kLeftMargin = 76;    // px: the y axis' labels
  static constexpr int kRightMargin = 12;   // px
  static constexpr int kTopMargin = 22;     // px: the legend
  static constexpr int kSyncHeight = 14;    // px: the sync lane under the plot
  static constexpr int kBottomMargin = 20;  // px: the time axis' labels
  static constexpr int kScopeRow = 14;      // px: one depth of the scope lane
  static constexpr int kLaneGap = 6;        // px between rank lanes (Note [Rank lanes])

  QSize size;                 // of the widget
  int scope_rows = 0;         // depths the scope lane shows (0: no scope lane)
  int lanes = 1;              // rank lanes in the plot
  uint64_t from = 0, to = 1;  // the times shown, [from, to)
  int64_t y_max = 1;          // the bytes at the top of a lane

  QRect plot() const;
  QRect lane(int lane) const;  // the part of plot() a rank lane takes (all of it for one)
  QRect scopeLane() const;     // under the plot; empty height without scopes
  QRect syncLane() const;      // under the scope lane
  int valueToY(int64_t bytes, int lane = 0) const;
  double tsToX(uint64_t ts) const;
  uint64_t xToTs(double x) const;  // clamped to the view
};

}  // namespace tidemark::gui
