#include "profiler/store/tensor_tables.h"

#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

using detail::Stmt;

namespace {

constexpr const char* kTensorColumns =
    "SELECT t.tensor_id, t.storage_id, t.base_id, t.device, t.sizes, t.strides, "
    "t.storage_offset, COALESCE(sd.text, ''), COALESCE(so.text, ''), t.create_ts, t.release_ts, "
    "t.thread, t.stack FROM tensors t LEFT JOIN strings sd ON sd.id = t.dtype "
    "LEFT JOIN strings so ON so.id = t.op ";

TensorRow tensor_row(const Stmt& q) {
  TensorRow t;
  t.tensor_id = q.u64(0);
  t.storage_id = q.u64(1);
  t.base_id = q.is_null(2) ? 0 : q.u64(2);
  t.device = q.i64(3);
  t.sizes = q.text(4);
  t.strides = q.text(5);
  t.storage_offset = q.i64(6);
  t.dtype = q.text(7);
  t.op = q.text(8);
  t.create_ts = q.u64(9);
  if (!q.is_null(10)) t.release_ts = q.u64(10);
  t.thread = q.u64(11);
  t.stack_id = q.is_null(12) ? 0 : q.u64(12);
  return t;
}

// The query of `filter`, its parameters bound.
Stmt tensor_query(const TraceReader& reader, const TensorFilter& f) {
  detail::Where w;
  if (f.tensor_id) w.add("t.tensor_id = #", static_cast<int64_t>(*f.tensor_id));
  if (f.views_of) w.add("t.base_id = # AND t.tensor_id != #", static_cast<int64_t>(*f.views_of));
  if (f.storage_id) w.add("t.storage_id = #", static_cast<int64_t>(*f.storage_id));
  if (f.device) w.add("t.device = #", *f.device);
  if (f.created_in) {
    w.add("t.create_ts >= #", detail::time_bound(f.created_in->first));
    w.add("t.create_ts <= #", detail::time_bound(f.created_in->second));
  }
  if (f.live_at)
    w.add("t.create_ts <= # AND (t.release_ts IS NULL OR t.release_ts > #)",
          detail::time_bound(*f.live_at));
  std::string tail = " ORDER BY t.create_ts, t.tensor_id";
  if (f.limit) tail += " LIMIT " + std::to_string(f.limit);
  return w.prepare(reader.db(), kTensorColumns, tail);
}

StorageRow storage_row(const Stmt& q) {
  StorageRow s;
  s.storage_id = q.u64(0);
  s.device = q.i64(1);
  s.addr = q.u64(2);
  s.nbytes = q.i64(3);
  s.create_ts = q.u64(4);
  if (!q.is_null(5)) s.release_ts = q.u64(5);
  return s;
}

constexpr const char* kStorageColumns =
    "SELECT storage_id, device, addr, nbytes, create_ts, release_ts FROM storages ";

}  // namespace

bool any_tensor(const TraceReader& reader) {
  if (!reader.db().table_exists("tensors")) return false;
  Stmt q(reader.db(), "SELECT 1 FROM tensors LIMIT 1");
  return q.step();
}

std::vector<TensorRow> tensor_rows(const TraceReader& reader, const TensorFilter& filter) {
  std::vector<TensorRow> out;
  for_each_tensor(reader, filter, [&](TensorRow& t) { out.push_back(std::move(t)); });
  return out;
}

void for_each_tensor(const TraceReader& reader, const TensorFilter& filter,
                     const std::function<void(TensorRow&)>& fn) {
  if (!reader.db().table_exists("tensors")) return;
  Stmt q = tensor_query(reader, filter);
  while (q.step()) {
    TensorRow row = tensor_row(q);
    fn(row);
  }
}

void for_each_storage(const TraceReader& reader, const std::function<void(const StorageRow&)>& fn) {
  if (!reader.db().table_exists("storages")) return;
  Stmt q(reader.db(), kStorageColumns);
  while (q.step()) fn(storage_row(q));
}

std::vector<StorageRow> storages_created_in(const TraceReader& reader, int64_t device,
                                            uint64_t addr_from, uint64_t addr_to, uint64_t from_ts,
                                            uint64_t to_ts) {
  std::vector<StorageRow> out;
  if (!reader.db().table_exists("storages")) return out;
  Stmt q(reader.db(), (std::string(kStorageColumns) +
                       "WHERE device = ?1 AND addr >= ?2 AND addr < ?3 AND create_ts >= ?4 AND "
                       "create_ts <= ?5 ORDER BY create_ts")
                          .c_str());
  q.bind(1, device).bind(2, addr_from).bind(3, addr_to).bind(4, from_ts).bind(5, to_ts);
  while (q.step()) out.push_back(storage_row(q));
  return out;
}

std::optional<StorageRow> storage_as_of(const TraceReader& reader, uint64_t storage_id,
                                        uint64_t ts) {
  if (!reader.db().table_exists("storages")) return std::nullopt;
  Stmt q(reader.db(), (std::string(kStorageColumns) +
                       "WHERE storage_id = ?1 AND create_ts <= ?2 ORDER BY create_ts DESC LIMIT 1")
                          .c_str());
  q.bind(1, storage_id).bind(2, ts);
  if (!q.step()) return std::nullopt;
  return storage_row(q);
}

}  // namespace tidemark::store
