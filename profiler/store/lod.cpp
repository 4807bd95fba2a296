#include "profiler/store/lod.h"

namespace tidemark::store::detail {

// Note [LOD levels]
// Level 0 holds every change (the values after it). Level L > 0 groups changes into buckets
// [k·w, (k+1)·w) of w = 4^L µs on the event clock and stores, per non-empty bucket, the
// number of changes and each curve's minimum, maximum and last value. Level L is computed
// from level L-1 (min of mins, max of maxes, last of lasts), so it is exact. A level is
// stored only when it has at most half the rows of the last stored level: in a sparse trace
// the fine levels would repeat level 0 row for row. Building stops at the first level with
// a single bucket (which is stored). `lod_levels` lists the stored levels; a viewer takes
// the coarsest one whose width is at most its time-per-pixel.

namespace {

struct Bucket {
  uint64_t t = 0;
  int64_t n = 0;
  Curves last, min, max;
};

void merge_into(Bucket& b, const Bucket& x) {
  b.n += x.n;
  b.last = x.last;
  auto lo = [](int64_t& a, int64_t v) { a = v < a ? v : a; };
  auto hi = [](int64_t& a, int64_t v) { a = v > a ? v : a; };
  lo(b.min.allocated, x.min.allocated);
  lo(b.min.active, x.min.active);
  lo(b.min.reserved, x.min.reserved);
  lo(b.min.requested, x.min.requested);
  hi(b.max.allocated, x.max.allocated);
  hi(b.max.active, x.max.active);
  hi(b.max.reserved, x.max.reserved);
  hi(b.max.requested, x.max.requested);
}

}  // namespace

void LodBuilder::write(Db& db, int64_t device) {
  if (points_.empty()) return;
  Stmt row(db,
           "INSERT INTO memory_lod (device, level, t, seq, n, allocated, allocated_min, "
           "allocated_max, active, active_min, active_max, reserved, reserved_min, reserved_max, "
           "requested, requested_min, requested_max) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt level_row(db, "INSERT INTO lod_levels (device, level, width_ns, rows) VALUES (?, ?, ?, ?)");
  auto put = [&](int level, const Bucket& b, const uint64_t* seq) {
    row.bind(1, device).bind(2, level).bind(3, b.t);
    if (seq) row.bind(4, *seq);
    else row.bind_null(4);
    row.bind(5, b.n)
        .bind(6, b.last.allocated).bind(7, b.min.allocated).bind(8, b.max.allocated)
        .bind(9, b.last.active).bind(10, b.min.active).bind(11, b.max.active)
        .bind(12, b.last.reserved).bind(13, b.min.reserved).bind(14, b.max.reserved)
        .bind(15, b.last.requested).bind(16, b.min.requested).bind(17, b.max.requested)
        .run();
  };

  std::vector<Bucket> level;
  level.reserve(points_.size());
  for (const Point& p : points_) {
    Bucket b{p.ts, 1, p.v, p.v, p.v};
    put(0, b, &p.seq);
    level.push_back(b);
  }
  level_row.bind(1, device).bind(2, 0).bind(3, int64_t{0}).bind(4, static_cast<int64_t>(level.size())).run();
  points_.clear();
  points_.shrink_to_fit();

  size_t stored_rows = level.size();
  for (int l = 1; l <= kMaxLodLevel && level.size() > 1; ++l) {
    const uint64_t w = lod_width_ns(l);
    std::vector<Bucket> next;
    for (const Bucket& b : level) {
      uint64_t t = b.t / w * w;
      if (next.empty() || next.back().t != t) {
        Bucket nb = b;
        nb.t = t;
        next.push_back(nb);
      } else {
        merge_into(next.back(), b);
      }
    }
    level = std::move(next);
    if (level.size() * 2 <= stored_rows || level.size() == 1) {
      for (const Bucket& b : level) put(l, b, nullptr);
      level_row.bind(1, device).bind(2, l).bind(3, w).bind(4, static_cast<int64_t>(level.size())).run();
      stored_rows = level.size();
    }
  }
}

}  // namespace tidemark::store::detail
