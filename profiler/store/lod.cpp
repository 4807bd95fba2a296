#include "profiler/store/lod.h"

#include "profiler/store/compress.h"
#include "profiler/store/varint.h"

namespace tidemark::store::detail {

// Note [LOD levels]
// Level 0 holds every change (the values after it). Level L > 0 groups changes into buckets
// [k·w, (k+1)·w) of w = 4^L µs on the event clock and stores, per non-empty bucket, the
// number of changes and each curve's minimum, maximum and last value. Level L is computed
// from level L-1 (min of mins, max of maxes, last of lasts), so it is exact. A level is
// stored only when it has at most a quarter of the rows of the last stored level: in a sparse
// trace the fine levels would repeat level 0 row for row, and a bucket row (twelve values)
// costs two to three times a change, so the levels above 0 together take at most a third of
// level 0's rows. A viewer then reads a few more rows per column where a level was skipped
// (about 16 instead of 4, from decoded chunks: still far below a millisecond per thousand
// columns). Building stops at the first level with a single bucket (which is stored).
// `lod_levels` lists the stored levels; a viewer takes the coarsest one whose width is at most
// its time-per-pixel.

// Note [LOD chunks]
// A level is stored as chunks of up to kLodChunkRows consecutive rows, one table row each,
// with the smallest and largest t, the first and last seq (level 0) and the row count beside
// the data; a reader keeps that directory and decodes only the chunks overlapping what it
// asks for. Inside a chunk every field is a varint delta against the previous row of the
// chunk (the first against 0), so chunks decode on their own:
//
//   t       zigzag(t - previous t)          (t may step back by a few ns across cores)
//   level 0: zigzag(seq - previous seq)      above: n, the changes summarised (>= 1)
//   then for allocated, active, reserved, requested:
//           value(value - previous value)    above level 0 also value(value - min) and
//                                            value(max - value)
//
// where value(d) is the size code of the event blocks: a multiple of 512 (most block sizes)
// stores zigzag(d / 512) << 1, anything else zigzag(d) << 1 | 1, and the code 1 (which no
// short form yields) escapes to zigzag(d) in a second varint for |d| >= 2^61. A change of
// one block takes about 10 bytes: a tenth of a row of plain columns.

namespace {

using CurveField = int64_t LodRow::*;
// Per curve: the value after the last change, the minimum and the maximum.
constexpr CurveField kFields[4][3] = {
    {&LodRow::allocated, &LodRow::allocated_min, &LodRow::allocated_max},
    {&LodRow::active, &LodRow::active_min, &LodRow::active_max},
    {&LodRow::reserved, &LodRow::reserved_min, &LodRow::reserved_max},
    {&LodRow::requested, &LodRow::requested_min, &LodRow::requested_max}};

// Curve's index in kFields (allocated, active, reserved, requested).
constexpr int curve_index(Curve c) {
  switch (c) {
    case Curve::allocated:
      return 0;
    case Curve::active:
      return 1;
    case Curve::reserved:
      return 2;
    case Curve::requested:
      return 3;
  }
  return 0;
}

void merge_into(LodRow& b, const LodRow& x) {
  b.n += x.n;
  for (const auto& f : kFields) {
    b.*f[0] = x.*f[0];
    b.*f[1] = std::min(b.*f[1], x.*f[1]);
    b.*f[2] = std::max(b.*f[2], x.*f[2]);
  }
}

constexpr uint64_t kEscape = 1;
constexpr int64_t kShortLimit = int64_t{1} << 61;

uint8_t* put_value(uint8_t* p, int64_t d) {
  if (d > -kShortLimit && d < kShortLimit) {
    if (d % 512 == 0) return put_varint(p, zigzag(d / 512) << 1);
    return put_varint(p, (zigzag(d) << 1) | 1);
  }
  return put_varint(put_varint(p, kEscape), zigzag(d));
}

int64_t read_value(VarintReader& r) {
  const uint64_t c = r.var();
  if (c == kEscape) return r.svar();
  const int64_t v = unzigzag(c >> 1);
  if (c & 1) return v;
  // put_value writes a multiple of 512 this way only below kShortLimit: a larger one is damage
  // (and its product would overflow).
  if (v >= kShortLimit / 512 || v <= -kShortLimit / 512) r.fail("a value beyond its encoding");
  return v * 512;
}

}  // namespace

int64_t lod_value(const LodRow& r, Curve c) {
  return r.*kFields[curve_index(c)][0];
}
int64_t lod_max(const LodRow& r, Curve c) {
  return r.*kFields[curve_index(c)][2];
}

std::vector<uint8_t> encode_lod_chunk(int level, std::span<const LodRow> rows) {
  // Per row: t and seq or n, then 4 curves x up to 3 values, each at most two varints.
  std::string out(rows.size() * (2 + 4 * 3 * 2) * kMaxVarintBytes, '\0');
  auto* const begin = reinterpret_cast<uint8_t*>(out.data());
  uint8_t* p = begin;
  uint64_t prev_t = 0, prev_seq = 0;
  int64_t prev[4] = {};
  for (const LodRow& r : rows) {
    p = put_varint(p, delta(r.t, prev_t));
    prev_t = r.t;
    if (level == 0) {
      p = put_varint(p, delta(r.seq.value_or(0), prev_seq));
      prev_seq = r.seq.value_or(0);
    } else {
      p = put_varint(p, static_cast<uint64_t>(r.n));
    }
    for (int c = 0; c < 4; ++c) {
      const int64_t v = r.*kFields[c][0];
      p = put_value(p, v - prev[c]);
      prev[c] = v;
      if (level > 0) {
        p = put_value(p, v - r.*kFields[c][1]);
        p = put_value(p, r.*kFields[c][2] - v);
      }
    }
  }
  return compress({begin, static_cast<size_t>(p - begin)});
}

void decode_lod_chunk(int level, std::span<const uint8_t> stored, int64_t rows,
                      std::vector<LodRow>& out, const std::string& what) {
  std::vector<uint8_t> encoded;
  decompress(stored, encoded, what, "memory_lod chunk", Checksum::required);
  const std::span<const uint8_t> data(encoded);
  VarintReader r(data, what, "memory_lod chunk");
  if (rows < 0 || static_cast<uint64_t>(rows) > data.size()) r.fail("row count beyond its data");
  uint64_t t = 0, seq = 0;
  int64_t prev[4] = {};
  auto in_range = [&](int64_t v) {
    if (v > kMaxLodValue || v < -kMaxLodValue) r.fail("a curve value beyond 2^60 bytes");
    return v;
  };
  out.reserve(out.size() + static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    LodRow row;
    t += static_cast<uint64_t>(r.svar());
    row.t = t;
    if (level == 0) {
      seq += static_cast<uint64_t>(r.svar());
      row.seq = seq;
      row.n = 1;
    } else {
      const uint64_t n = r.var();
      if (n == 0 || n > (uint64_t{1} << 62)) r.fail("a bucket without changes");
      row.n = static_cast<int64_t>(n);
    }
    for (int c = 0; c < 4; ++c) {
      const int64_t v = in_range(static_cast<int64_t>(static_cast<uint64_t>(prev[c]) +
                                                      static_cast<uint64_t>(read_value(r))));
      prev[c] = v;
      row.*kFields[c][0] = v;
      if (level == 0) {
        row.*kFields[c][1] = row.*kFields[c][2] = v;
        continue;
      }
      const int64_t below = read_value(r), above = read_value(r);
      if (below < 0 || above < 0 || below > kMaxLodValue || above > kMaxLodValue)
        r.fail("a minimum above the value or a maximum below it");
      row.*kFields[c][1] = in_range(v - below);
      row.*kFields[c][2] = in_range(v + above);
    }
    out.push_back(row);
  }
  if (!r.done()) r.fail("bytes after the last row");
}

// Note [LOD builder memory]
// A trace of millions of changes keeps them (48 bytes each) until finalize writes the levels.
// A growing vector would copy them at every doubling and the kernel zero twice the pages it
// ends with (a fifth of a 1 GB import's finalize was page clearing in those copies), so they
// go in fixed blocks. The levels above 0 are not built as whole vectors either: `add` counts
// each level's buckets as the changes arrive (a change opens a bucket at level L exactly when
// it opens one at every level below, so the count stops at the first level it does not), which
// is all Note [LOD levels]' storing rule needs; `write` then decides the stored levels and
// builds them in one pass, each level holding its open bucket and handing a closed one to the
// level above and, when stored, to a chunk of at most kLodChunkRows rows.

void LodBuilder::add(uint64_t ts, uint64_t seq, const Curves& after) {
  if (blocks_.empty() || blocks_.back().size() == kBlockPoints) {
    blocks_.emplace_back();
    blocks_.back().reserve(kBlockPoints);
  }
  blocks_.back().push_back({ts, seq, after});
  for (int l = 1; l <= kMaxLodLevel; ++l) {
    const uint64_t w = lod_width_ns(l), t = ts / w * w;
    if (size_ > 0 && bucket_[l] == t) break;
    bucket_[l] = t;
    ++buckets_[l];
  }
  ++size_;
}

void LodBuilder::write(Db& db, int64_t device) {
  if (size_ == 0) return;
  Stmt chunk_row(db,
                 "INSERT INTO memory_lod (device, level, chunk, min_t, max_t, first_seq, last_seq, "
                 "rows, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt level_row(db, "INSERT INTO lod_levels (device, level, width_ns, rows) VALUES (?, ?, ?, ?)");
  auto put_chunk = [&](int level, int64_t chunk, std::span<const LodRow> part) {
    uint64_t lo = part.front().t, hi = part.front().t;
    for (const LodRow& r : part) {
      lo = std::min(lo, r.t);
      hi = std::max(hi, r.t);
    }
    const std::vector<uint8_t> data = encode_lod_chunk(level, part);
    chunk_row.bind(1, device).bind(2, level).bind(3, chunk).bind(4, lo).bind(5, hi);
    if (level == 0)
      chunk_row.bind(6, *part.front().seq).bind(7, *part.back().seq);
    else
      chunk_row.bind_null(6).bind_null(7);
    chunk_row.bind(8, static_cast<int64_t>(part.size())).bind_blob(9, data).run();
  };
  auto put_level = [&](int level, uint64_t width, size_t rows) {
    level_row.bind(1, device)
        .bind(2, level)
        .bind(3, width)
        .bind(4, static_cast<int64_t>(rows))
        .run();
  };
  auto row_of = [&](const Point& p) {
    LodRow r;
    r.t = p.ts;
    r.seq = p.seq;
    r.n = 1;
    const int64_t v[4] = {p.v.allocated, p.v.active, p.v.reserved, p.v.requested};
    for (int c = 0; c < 4; ++c) {
      if (v[c] > kMaxLodValue || v[c] < -kMaxLodValue)
        throw StoreError(db.path() + ": damaged trace: after event " + std::to_string(p.seq) +
                         " a memory curve reaches " + std::to_string(v[c]) + " bytes, beyond 2^60");
      r.*kFields[c][0] = r.*kFields[c][1] = r.*kFields[c][2] = v[c];
    }
    return r;
  };

  // Level 0: every change, chunk by chunk.
  std::vector<LodRow> part;
  part.reserve(kLodChunkRows);
  int64_t chunk = 0;
  auto flush0 = [&] {
    if (!part.empty()) put_chunk(0, chunk++, part);
    part.clear();
  };
  for (const auto& block : blocks_)
    for (const Point& p : block) {
      part.push_back(row_of(p));
      if (part.size() == kLodChunkRows) flush0();
    }
  flush0();
  put_level(0, 0, size_);
  if (size_ == 1) {
    blocks_.clear();
    return;
  }

  // Which levels Note [LOD levels] stores, from their sizes alone; building stops at the
  // first level with a single bucket.
  bool stored[kMaxLodLevel + 1] = {};
  int top = 0;
  size_t stored_rows = size_;
  for (int l = 1; l <= kMaxLodLevel; ++l) {
    if (l > 1 && buckets_[l - 1] <= 1) break;
    top = l;
    if (buckets_[l] * 4 <= stored_rows || buckets_[l] == 1) {
      stored[l] = true;
      stored_rows = buckets_[l];
    }
  }

  // One pass: each level's open bucket; a closed one goes up a level and, if stored, out.
  struct Level {
    LodRow open;
    bool has = false;
    std::vector<LodRow> rows;  // the chunk being filled
    int64_t chunk = 0;
  };
  std::vector<Level> levels(static_cast<size_t>(top) + 1);
  auto flush = [&](int l) {
    Level& lv = levels[static_cast<size_t>(l)];
    if (!lv.rows.empty()) put_chunk(l, lv.chunk++, lv.rows);
    lv.rows.clear();
  };
  // Hands `row` (a change at level 0, a closed bucket above) to level l.
  auto feed = [&](auto& self, int l, const LodRow& row) -> void {
    Level& lv = levels[static_cast<size_t>(l)];
    const uint64_t w = lod_width_ns(l), t = row.t / w * w;
    if (lv.has && lv.open.t == t) {
      merge_into(lv.open, row);
      return;
    }
    if (lv.has) {
      const LodRow closed = lv.open;
      if (stored[l]) {
        lv.rows.push_back(closed);
        if (lv.rows.size() == kLodChunkRows) flush(l);
      }
      if (l < top) self(self, l + 1, closed);
    }
    lv.open = row;
    lv.open.seq.reset();
    lv.open.t = t;
    lv.has = true;
  };
  for (const auto& block : blocks_)
    for (const Point& p : block) feed(feed, 1, row_of(p));
  blocks_.clear();
  // The last open buckets close, from the bottom up.
  for (int l = 1; l <= top; ++l) {
    Level& lv = levels[static_cast<size_t>(l)];
    if (stored[l]) lv.rows.push_back(lv.open);
    if (l < top) feed(feed, l + 1, lv.open);
    flush(l);
    if (stored[l]) put_level(l, lod_width_ns(l), buckets_[l]);
  }
}

}  // namespace tidemark::store::detail

namespace tidemark::store {
int64_t curve_value(const LodRow& r, Curve c) {
  return detail::lod_value(r, c);
}
}  // namespace tidemark::store
