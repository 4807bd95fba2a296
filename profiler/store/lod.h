// The level-of-detail pyramid of the memory curves (table memory_lod, docs/trace-format.md).
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store::detail {

struct Curves {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
};

// Bucket width of a level: 4^level microseconds (level 0: no buckets, every change).
constexpr uint64_t lod_width_ns(int level) {
  uint64_t w = 1000;
  for (int i = 0; i < level; ++i) w *= 4;
  return level == 0 ? 0 : w;
}
inline constexpr int kMaxLodLevel = 24;

// Collects the changes of one device's curves in event order, then writes every level.
class LodBuilder {
 public:
  void add(uint64_t ts, uint64_t seq, const Curves& after) { points_.push_back({ts, seq, after}); }
  bool empty() const { return points_.empty(); }
  // Writes level 0 and the coarser levels worth storing (Note [LOD levels] in lod.cpp), and
  // their lod_levels rows.
  void write(Db& db, int64_t device);

 private:
  struct Point {
    uint64_t ts, seq;
    Curves v;
  };
  std::vector<Point> points_;
};

}  // namespace tidemark::store::detail
