#include "profiler/analysis/details.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"
#include "profiler/store/tensor_tables.h"

namespace tidemark::analysis {

std::vector<TensorRecord> tensor_records(const Trace& trace, const store::TensorFilter& filter) {
  std::vector<TensorRecord> out;
  store::for_each_tensor(trace.reader(), filter, [&](store::TensorRow& r) {
    static_cast<store::TensorRow&>(out.emplace_back()) = std::move(r);
  });
  return out;
}

std::optional<AllocationDetails> allocation_details(const Trace& trace, uint64_t seq) {
  std::vector<store::AllocationRow> rows =
      store::allocation_rows(trace.reader(), {.seq = seq}, store::AllocationOrder::none);
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
  // Storages created inside the block while it was allocated (a storage is created after the
  // block it lives in is allocated, and before that block is freed).
  const uint64_t until = row.free_requested_ts.value_or(trace.end_ns());
  for (const store::StorageRow& s : store::storages_created_in(
           trace.reader(), row.device, row.addr, row.addr + row.size, row.alloc_ts, until)) {
    std::vector<TensorRecord> ts =
        tensor_records(trace, {.storage_id = s.storage_id,
                               .device = row.device,
                               .created_in = std::pair{row.alloc_ts, until}});
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
  std::vector<TensorRecord> first = tensor_records(trace, {.tensor_id = tensor_id, .limit = 1});
  if (first.empty()) return std::nullopt;
  TensorDetails d;
  d.tensor = std::move(first.front());
  d.device_id = d.tensor.device;
  if (const DeviceRef* dev = trace.device_by_id(d.device_id)) d.device = dev->name;
  d.tensor.site = trace.site(d.tensor.stack_id).label;
  d.frames = trace.stack_frames(d.tensor.stack_id);
  if (d.tensor.release_ts) d.lifetime_ns = *d.tensor.release_ts - d.tensor.create_ts;
  d.views = tensor_records(trace, {.views_of = tensor_id});
  for (TensorRecord& v : d.views) v.site = trace.site(v.stack_id).label;
  // The storage as it was when the tensor was created, then the block holding it then.
  const std::optional<store::StorageRow> storage =
      store::storage_as_of(trace.reader(), d.tensor.storage_id, d.tensor.create_ts);
  if (!storage) return d;
  d.storage_addr = storage->addr;
  d.storage_nbytes = static_cast<uint64_t>(storage->nbytes);
  if (std::optional<store::AllocationRow> block = store::allocation_holding(
          trace.reader(), d.device_id, d.storage_addr, storage->create_ts))
    d.allocation = allocation_details(trace, *block);
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
