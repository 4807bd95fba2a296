#include "profiler/store/allocator_tables.h"

#include <algorithm>
#include <string>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

namespace {

int64_t bound(uint64_t ts) {
  return static_cast<int64_t>(std::min<uint64_t>(ts, INT64_MAX));
}

}  // namespace

std::vector<SegmentRow> segments_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                    std::optional<events::Pool> pool) {
  if (!reader.db().table_exists("segments")) return {};
  std::string where = "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_ts IS NULL OR free_ts > ?2)";
  if (pool) where += std::string(" AND pool = '") + pool_name(*pool) + "'";
  return reader.segments_where(where + " ORDER BY addr", {device, bound(ts)});
}

std::vector<AllocationRow> blocks_active_at(const TraceReader& reader, int64_t device,
                                            uint64_t ts) {
  return reader.allocations_where(
      "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_completed_ts IS NULL OR "
      "free_completed_ts > ?2) ORDER BY addr",
      {device, bound(ts)});
}

}  // namespace tidemark::store
