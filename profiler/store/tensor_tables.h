// What analysis asks of the `tensors` and `storages` tables finalize builds from tensorlib's
// tensor and storage events (docs/trace-format.md). A trace of a program not built on
// tensorlib (an imported snapshot, a CUDA-injected run) has no rows in them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/store/trace_reader.h"

namespace tidemark::store {

// One row of `tensors`: a tensor or a view (base_id: its root tensor; 0 for none).
struct TensorRow {
  uint64_t tensor_id = 0, storage_id = 0, base_id = 0;
  int64_t device = 0;
  std::string sizes, strides;  // JSON arrays of integers
  int64_t storage_offset = 0;
  std::string dtype, op;  // "" when not recorded
  uint64_t create_ts = 0;
  std::optional<uint64_t> release_ts;  // empty: alive at the end
  uint64_t thread = 0, stack_id = 0;
};

// Which tensors a query takes; the fields combine with AND, and a default filter takes all.
struct TensorFilter {
  std::optional<uint64_t> tensor_id;
  std::optional<uint64_t> views_of;  // the views whose base is this tensor (not itself)
  std::optional<uint64_t> storage_id;
  std::optional<int64_t> device;
  std::optional<std::pair<uint64_t, uint64_t>> created_in;  // created in [first, second]
  std::optional<uint64_t> live_at;  // created at or before it, not released by it
  size_t limit = 0;                 // the first `limit` rows only; 0: every row
};

// Whether the trace recorded any tensor.
bool any_tensor(const TraceReader& reader);
// The rows `filter` takes, by creation time then id.
std::vector<TensorRow> tensor_rows(const TraceReader& reader, const TensorFilter& filter = {});
// One row at a time, the consumer's to keep: it may move the strings out.
void for_each_tensor(const TraceReader& reader, const TensorFilter& filter,
                     const std::function<void(TensorRow&)>& fn);

// One row of `storages`: the owner of one block, from its creation to its release.
struct StorageRow {
  uint64_t storage_id = 0;
  int64_t device = 0;
  uint64_t addr = 0;
  int64_t nbytes = 0;
  uint64_t create_ts = 0;
  std::optional<uint64_t> release_ts;  // empty: alive at the end
};

// Every storage, by id.
void for_each_storage(const TraceReader& reader, const std::function<void(const StorageRow&)>& fn);
// The storages of `device` at addresses in [addr_from, addr_to) created in [from_ts, to_ts],
// by creation time.
std::vector<StorageRow> storages_created_in(const TraceReader& reader, int64_t device,
                                            uint64_t addr_from, uint64_t addr_to, uint64_t from_ts,
                                            uint64_t to_ts);
// The storage `storage_id` as it was at `ts`: its latest row created at or before it.
std::optional<StorageRow> storage_as_of(const TraceReader& reader, uint64_t storage_id,
                                        uint64_t ts);

}  // namespace tidemark::store
