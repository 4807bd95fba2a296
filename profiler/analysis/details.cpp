#include "profiler/analysis/details.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "profiler/store/event_tables.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::analysis {

using store::detail::Stmt;

std::vector<TensorRecord> tensors_where(const Trace& trace, const std::string& where,
                                        const std::vector<int64_t>& params) {
  std::vector<TensorRecord> out;
  if (!trace.db().table_exists("tensors")) return out;
  Stmt q(trace.db(),
         ("SELECT t.tensor_id, t.storage_id, t.base_id, t.sizes, t.strides, t.storage_offset, "
          "COALESCE(sd.text, ''), COALESCE(so.text, ''), t.create_ts, t.release_ts, t.stack, "
          "t.device FROM tensors t LEFT JOIN strings sd ON sd.id = t.dtype "
          "LEFT JOIN strings so ON so.id = t.op " +
          where)
             .c_str());
  for (size_t i = 0; i < params.size(); ++i) q.bind(static_cast<int>(i + 1), params[i]);
  while (q.step()) {
    TensorRecord& t = out.emplace_back();
    t.tensor_id = q.u64(0);
    t.storage_id = q.u64(1);
    t.base_id = q.is_null(2) ? 0 : q.u64(2);
    t.sizes = q.text(3);
    t.strides = q.text(4);
    t.storage_offset = q.i64(5);
    t.dtype = q.text(6);
    t.op = q.text(7);
    t.create_ts = q.u64(8);
    if (!q.is_null(9)) t.release_ts = q.u64(9);
    t.stack_id = q.is_null(10) ? 0 : q.u64(10);
    t.device_id = q.i64(11);
  }
  return out;
}

std::optional<AllocationDetails> allocation_details(const Trace& trace, uint64_t seq) {
  std::vector<store::AllocationRow> rows =
      trace.reader().allocations_where("WHERE seq = ?1", {static_cast<int64_t>(seq)});
  if (rows.empty()) return std::nullopt;
  return allocation_details(trace, rows.front());
}

AllocationDetails allocation_details(const Trace& trace, const store::AllocationRow& row) {
  AllocationDetails d;
  d.row = row;
  if (const DeviceRef* dev = trace.device_by_id(row.device)) d.device = dev->name;
  d.site = trace.site(row.stack_id);
  d.frames = trace.stack_frames(row.stack_id);
  if (row.free_requested_ts) d.lifetime_ns = *row.free_requested_ts - row.alloc_ts;
  if (!trace.db().table_exists("storages") || !trace.db().table_exists("tensors")) return d;
  // Storages created inside the block while it was allocated (a storage is created after the
  // block it lives in is allocated, and before that block is freed).
  const uint64_t until = row.free_requested_ts.value_or(trace.end_ns());
  Stmt st(trace.db(),
          "SELECT storage_id FROM storages WHERE device = ? AND addr >= ? AND addr < ? AND "
          "create_ts >= ? AND create_ts <= ? ORDER BY create_ts");
  st.bind(1, row.device)
      .bind(2, row.addr)
      .bind(3, row.addr + row.size)
      .bind(4, row.alloc_ts)
      .bind(5, until);
  std::vector<uint64_t> storage_ids;
  while (st.step()) storage_ids.push_back(st.u64(0));
  for (uint64_t sid : storage_ids) {
    std::vector<TensorRecord> ts = tensors_where(
        trace,
        "WHERE t.storage_id = ?1 AND t.device = ?2 AND t.create_ts >= ?3 AND t.create_ts <= ?4 "
        "ORDER BY t.create_ts, t.tensor_id",
        {static_cast<int64_t>(sid), row.device, static_cast<int64_t>(row.alloc_ts),
         static_cast<int64_t>(until)});
    d.tensors.insert(d.tensors.end(), std::make_move_iterator(ts.begin()),
                     std::make_move_iterator(ts.end()));
  }
  std::stable_sort(
      d.tensors.begin(), d.tensors.end(),
      [](const TensorRecord& a, const TensorRecord& b) { return a.create_ts < b.create_ts; });
  for (size_t i = 0; i < d.tensors.size(); ++i)
    d.tensors[i].site = trace.site(d.tensors[i].stack_id).label;
  // A view holds its base, so a base is released no earlier than its last view: when views
  // shared the storage, the view released last is what kept it alive longest; otherwise the
  // tensor released last.
  auto later = [](const TensorRecord& a, const TensorRecord& b) {
    return a.release_ts.value_or(UINT64_MAX) > b.release_ts.value_or(UINT64_MAX);
  };
  for (const bool views : {true, false}) {
    for (size_t i = 0; i < d.tensors.size(); ++i) {
      if (views && !d.tensors[i].is_view()) continue;
      if (!d.kept_alive_by || later(d.tensors[i], d.tensors[*d.kept_alive_by])) d.kept_alive_by = i;
    }
    if (d.kept_alive_by) break;
  }
  return d;
}

std::optional<TensorDetails> tensor_details(const Trace& trace, uint64_t tensor_id) {
  std::vector<TensorRecord> first =
      tensors_where(trace, "WHERE t.tensor_id = ?1 ORDER BY t.create_ts, t.tensor_id LIMIT 1",
                    {static_cast<int64_t>(tensor_id)});
  if (first.empty()) return std::nullopt;
  TensorDetails d;
  d.tensor = std::move(first.front());
  d.device_id = d.tensor.device_id;
  if (const DeviceRef* dev = trace.device_by_id(d.device_id)) d.device = dev->name;
  d.tensor.site = trace.site(d.tensor.stack_id).label;
  d.frames = trace.stack_frames(d.tensor.stack_id);
  if (d.tensor.release_ts) d.lifetime_ns = *d.tensor.release_ts - d.tensor.create_ts;
  d.views = tensors_where(
      trace, "WHERE t.base_id = ?1 AND t.tensor_id != ?1 ORDER BY t.create_ts, t.tensor_id",
      {static_cast<int64_t>(tensor_id)});
  for (TensorRecord& v : d.views) v.site = trace.site(v.stack_id).label;
  if (!trace.db().table_exists("storages")) return d;
  // The storage as it was when the tensor was created, then the block holding it then.
  Stmt st(trace.db(),
          "SELECT addr, nbytes, create_ts FROM storages WHERE storage_id = ? AND "
          "create_ts <= ? ORDER BY create_ts DESC LIMIT 1");
  st.bind(1, d.tensor.storage_id).bind(2, d.tensor.create_ts);
  if (!st.step()) return d;
  d.storage_addr = st.u64(0);
  d.storage_nbytes = st.u64(1);
  const uint64_t created = st.u64(2);
  std::vector<store::AllocationRow> rows = trace.reader().allocations_where(
      "WHERE device = ?1 AND addr <= ?2 AND addr + size > ?2 AND alloc_ts <= ?3 AND "
      "(free_requested_ts IS NULL OR free_requested_ts >= ?3) ORDER BY alloc_ts DESC LIMIT 1",
      {d.device_id, static_cast<int64_t>(d.storage_addr), static_cast<int64_t>(created)});
  if (!rows.empty()) d.allocation = allocation_details(trace, rows.front());
  return d;
}

std::vector<ScopeSpan> scopes(const Trace& trace, uint64_t from_ts, uint64_t to_ts) {
  std::vector<ScopeSpan> out;
  for (store::ScopeRow& r : store::scopes_overlapping(trace.reader(), from_ts, to_ts)) {
    ScopeSpan s;
    s.thread = r.thread;
    s.name = std::move(r.name);
    s.path = std::move(r.path);
    s.depth = static_cast<int>(r.depth);
    s.push_ts = r.push_ts;
    s.pop_ts = r.pop_ts;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tidemark::analysis
