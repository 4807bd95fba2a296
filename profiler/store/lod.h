// The level-of-detail pyramid of the memory curves (table memory_lod, docs/trace-format.md):
// how finalize builds it and how its chunks are encoded and decoded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "profiler/events/events.h"
#include "profiler/store/sqlite_db.h"
#include "profiler/store/trace_reader.h"

namespace tidemark::store::detail {

using Curves = events::Curves;

// Bucket width of a level: 4^level microseconds (level 0: no buckets, every change).
constexpr uint64_t lod_width_ns(int level) {
  uint64_t w = 1000;
  for (int i = 0; i < level; ++i) w *= 4;
  return level == 0 ? 0 : w;
}
inline constexpr int kMaxLodLevel = 24;
// Rows per chunk of a level (Note [LOD chunks] in lod.cpp): a viewer decodes a few chunks
// around what it shows.
inline constexpr size_t kLodChunkRows = 2048;
// The largest curve value (either sign) a trace may hold: 16 blocks of the largest size an
// event may have (kMaxEventBytes) at once. Finalize refuses a trace whose curves go beyond it
// as damaged, and a reader a chunk holding one; so no difference of values overflows.
inline constexpr int64_t kMaxLodValue = int64_t{1} << 60;

// Collects the changes of one device's curves in event order, then writes every level.
class LodBuilder {
 public:
  void add(uint64_t ts, uint64_t seq, const Curves& after);
  bool empty() const { return size_ == 0; }
  // Writes level 0 and the coarser levels worth storing (Note [LOD levels] in lod.cpp), in
  // chunks, and their lod_levels rows. Throws StoreError when a value is beyond kMaxLodValue.
  void write(Db& db, int64_t device);

 private:
  struct Point {
    uint64_t ts, seq;
    Curves v;
  };
  // Note [LOD builder memory]: the changes in blocks that never move, and per level only the
  // bucket count and the last bucket's start.
  static constexpr size_t kBlockPoints = size_t{1} << 16;
  std::vector<std::vector<Point>> blocks_;
  size_t size_ = 0;
  uint64_t bucket_[kMaxLodLevel + 1] = {};  // level L's last bucket start (L >= 1)
  size_t buckets_[kMaxLodLevel + 1] = {};   // level L's bucket count so far
};

// A curve's value after a row's last change, and its largest in the row.
int64_t lod_value(const LodRow& r, Curve c);
int64_t lod_max(const LodRow& r, Curve c);

// A chunk's `data`: the rows of one level, in stored order, encoded and compressed (Note [LOD
// chunks], Note [Compressed blobs]).
std::vector<uint8_t> encode_lod_chunk(int level, std::span<const LodRow> rows);
// Appends the `rows` rows of a chunk of `level` to `out`. Throws StoreError naming `what` on
// data that finalize cannot have written (a damaged frame, truncated, trailing bytes, a value
// beyond kMaxLodValue, a minimum above the value or a maximum below it, an empty bucket).
void decode_lod_chunk(int level, std::span<const uint8_t> stored, int64_t rows,
                      std::vector<LodRow>& out, const std::string& what);

}  // namespace tidemark::store::detail
