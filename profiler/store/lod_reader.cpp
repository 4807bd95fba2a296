// TraceReader's queries of the memory curves: the chunks of memory_lod (Note [LOD chunks] in
// lod.cpp) found through a directory read once per level and decoded as needed.
#include "profiler/store/lod_reader.h"

#include <algorithm>
#include <limits>

#include "profiler/store/lod.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

using detail::Db;
using detail::Stmt;

namespace {

// "No end": times are stored as SQLite integers, so none is above this.
constexpr uint64_t kNever = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

}  // namespace

const TraceReader::LodChunks& TraceReader::lod_chunks(int64_t device, int level) const {
  require_finalized();
  std::lock_guard<std::mutex> lock(lod_cache_->mu);
  auto& slot = lod_cache_->levels[{device, level}];
  if (slot) return *slot;
  auto c = std::make_unique<LodChunks>();
  c->level = level;
  Stmt s(*db_,
         "SELECT id, min_t, max_t, first_seq, last_seq, rows FROM memory_lod WHERE device = ? "
         "AND level = ? ORDER BY chunk");
  s.bind(1, device).bind(2, level);
  auto damaged = [&](const LodChunks::Chunk& ch, const char* why) {
    throw StoreError(path() + ": damaged: memory_lod chunk " + std::to_string(ch.id) + " (device " +
                     std::to_string(device) + ", level " + std::to_string(level) + ") " + why +
                     "; `tidemark finalize " + path() + "` rebuilds it from the events");
  };
  while (s.step()) {
    LodChunks::Chunk ch{s.i64(0), s.u64(1), s.u64(2), 0, 0, s.i64(5)};
    if (ch.rows <= 0 || ch.rows > (int64_t{1} << 30)) damaged(ch, "has no rows");
    if (ch.min_t > ch.max_t) damaged(ch, "ends before it starts");
    if (level == 0) {
      if (s.is_null(3) || s.is_null(4)) damaged(ch, "has no seq range");
      ch.first_seq = s.u64(3);
      ch.last_seq = s.u64(4);
      if (ch.first_seq > ch.last_seq ||
          (!c->chunks.empty() && ch.first_seq <= c->chunks.back().last_seq))
        damaged(ch, "is out of seq order");
    }
    c->chunks.push_back(ch);
  }
  const size_t n = c->chunks.size();
  c->max_t_upto.resize(n);
  c->min_t_from.resize(n);
  for (size_t i = 0; i < n; ++i)
    c->max_t_upto[i] = std::max(c->chunks[i].max_t, i ? c->max_t_upto[i - 1] : 0);
  for (size_t i = n; i-- > 0;)
    c->min_t_from[i] = std::min(c->chunks[i].min_t, i + 1 < n ? c->min_t_from[i + 1] : kNever);
  slot = std::move(c);
  return *slot;
}

void TraceReader::decode_lod(const LodChunks& chunks, size_t i, std::vector<LodRow>& out) const {
  const LodChunks::Chunk& ch = chunks.chunks[i];
  Stmt s(*db_, "SELECT data FROM memory_lod WHERE id = ?");
  s.bind(1, ch.id);
  const std::string what = path() + ": memory_lod chunk " + std::to_string(ch.id);
  if (!s.step()) throw StoreError(what + " vanished while the trace was read");
  const size_t before = out.size();
  detail::decode_lod_chunk(chunks.level, s.blob(0), ch.rows, out, what);
  for (size_t k = before; k < out.size(); ++k) {
    const LodRow& r = out[k];
    if (r.t < ch.min_t || r.t > ch.max_t ||
        (chunks.level == 0 && (*r.seq < ch.first_seq || *r.seq > ch.last_seq)))
      throw StoreError(what + ": corrupt memory_lod chunk (a row outside the chunk's range)");
  }
}

void TraceReader::for_each_lod(int64_t device, int level, uint64_t t0, uint64_t t1,
                               const std::function<bool(const LodRow&)>& fn) const {
  const LodChunks& c = lod_chunks(device, level);
  if (t1 < t0) return;
  // Chunks [first, end) may hold rows in [t0, t1].
  const size_t first =
      static_cast<size_t>(std::partition_point(c.max_t_upto.begin(), c.max_t_upto.end(),
                                               [&](uint64_t m) { return m < t0; }) -
                          c.max_t_upto.begin());
  const size_t end =
      static_cast<size_t>(std::partition_point(c.min_t_from.begin(), c.min_t_from.end(),
                                               [&](uint64_t m) { return m <= t1; }) -
                          c.min_t_from.begin());
  std::vector<LodRow> rows;
  for (size_t i = first; i < end; ++i) {
    const LodChunks::Chunk& ch = c.chunks[i];
    if (ch.max_t < t0 || ch.min_t > t1) continue;
    rows.clear();
    decode_lod(c, i, rows);
    for (const LodRow& r : rows)
      if (r.t >= t0 && r.t <= t1 && !fn(r)) return;
  }
}

std::vector<LodRow> TraceReader::lod(int64_t device, int level, uint64_t t0, uint64_t t1) const {
  std::vector<LodRow> out;
  for_each_lod(device, level, t0, t1, [&](const LodRow& r) {
    out.push_back(r);
    return true;
  });
  std::stable_sort(out.begin(), out.end(),
                   [](const LodRow& a, const LodRow& b) { return a.t < b.t; });
  return out;
}

std::optional<LodRow> TraceReader::lod_before(int64_t device, int level, uint64_t ts) const {
  const LodChunks& c = lod_chunks(device, level);
  // Chunks [0, end) hold a row with t < ts.
  size_t end = static_cast<size_t>(std::partition_point(c.min_t_from.begin(), c.min_t_from.end(),
                                                        [&](uint64_t m) { return m < ts; }) -
                                   c.min_t_from.begin());
  std::optional<LodRow> best;
  size_t best_chunk = 0;
  std::vector<LodRow> rows;
  // From the last such chunk back, while an earlier chunk may hold a later time (of equal
  // times, the last stored wins: a later row in the same chunk, never one in an earlier chunk).
  for (size_t i = end; i-- > 0;) {
    if (best && c.max_t_upto[i] <= best->t) break;
    rows.clear();
    decode_lod(c, i, rows);
    for (const LodRow& r : rows)
      if (r.t < ts && (!best || r.t > best->t || (r.t == best->t && best_chunk == i))) {
        best = r;
        best_chunk = i;
      }
  }
  return best;
}

std::optional<LodRow> TraceReader::lod_last(int64_t device, int level) const {
  const LodChunks& c = lod_chunks(device, level);
  if (c.chunks.empty()) return std::nullopt;
  std::vector<LodRow> rows;
  decode_lod(c, c.chunks.size() - 1, rows);
  if (rows.empty()) return std::nullopt;
  return rows.back();
}

std::optional<LodRow> TraceReader::lod_at_seq(int64_t device, uint64_t seq) const {
  const LodChunks& c = lod_chunks(device, 0);
  auto it = std::partition_point(c.chunks.begin(), c.chunks.end(),
                                 [&](const LodChunks::Chunk& ch) { return ch.last_seq < seq; });
  if (it == c.chunks.end() || it->first_seq > seq) return std::nullopt;
  std::vector<LodRow> rows;
  decode_lod(c, static_cast<size_t>(it - c.chunks.begin()), rows);
  for (const LodRow& r : rows)
    if (*r.seq == seq) return r;
  return std::nullopt;
}

std::optional<Peak> TraceReader::first_at_least(int64_t device, Curve curve, int64_t value,
                                                uint64_t t0, uint64_t t1) const {
  std::vector<LodLevel> levels = lod_levels(device);
  // Coarse first: a bucket of a level holds exactly the changes with t in [start, start + w),
  // so the search descends into the buckets reaching `value`, earliest first; a bucket that
  // reaches it only outside [t0, t1) is left for the next.
  std::sort(levels.begin(), levels.end(),
            [](const LodLevel& a, const LodLevel& b) { return a.level > b.level; });
  std::function<std::optional<Peak>(size_t, uint64_t, uint64_t)> search =
      [&](size_t li, uint64_t from, uint64_t to) -> std::optional<Peak> {
    if (to <= from || li >= levels.size()) return std::nullopt;
    const LodLevel& l = levels[li];
    if (l.level == 0) {
      std::optional<LodRow> hit;
      for_each_lod(device, 0, from, to - 1, [&](const LodRow& r) {
        if (detail::lod_value(r, curve) >= value &&
            (!hit || r.t < hit->t || (r.t == hit->t && *r.seq < *hit->seq)))
          hit = r;
        return true;
      });
      if (!hit) return std::nullopt;
      return Peak{detail::lod_value(*hit, curve), hit->t, *hit->seq};
    }
    std::vector<uint64_t> starts;
    for_each_lod(device, l.level, from - from % l.width_ns, to - 1, [&](const LodRow& r) {
      if (detail::lod_max(r, curve) >= value) starts.push_back(r.t);
      return true;
    });
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    for (uint64_t start : starts) {
      const uint64_t end = start + l.width_ns < start ? kNever : start + l.width_ns;
      if (auto p = search(li + 1, std::max(from, start), std::min(to, end))) return p;
    }
    return std::nullopt;
  };
  return search(0, t0, std::min(t1, kNever));
}

std::optional<Peak> TraceReader::peak(int64_t device, Curve curve) const {
  std::vector<LodLevel> levels = lod_levels(device);
  if (levels.empty()) return std::nullopt;
  const int coarsest =
      std::max_element(levels.begin(), levels.end(), [](const LodLevel& a, const LodLevel& b) {
        return a.level < b.level;
      })->level;
  std::optional<int64_t> highest;
  for_each_lod(device, coarsest, 0, kNever, [&](const LodRow& r) {
    highest = std::max(highest.value_or(detail::lod_max(r, curve)), detail::lod_max(r, curve));
    return true;
  });
  if (!highest) return std::nullopt;
  return first_at_least(device, curve, *highest, 0, kNever);
}

}  // namespace tidemark::store
