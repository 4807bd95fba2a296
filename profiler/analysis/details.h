// Details of one allocation (what the GUI's Details view and a future `tidemark show` print)
// and the scopes (module paths, NVTX ranges) over a time range, from the derived tables
// allocations, storages, tensors and scopes (docs/trace-format.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

struct AllocationDetails {
  store::AllocationRow row;  // sizes, times (absolute), stream, pool, scope, category, stack
  std::string device;
  Site site;
  std::vector<std::string> frames;  // symbolized stack, innermost first
  // free_requested - alloc; empty when never freed (lived to the end of the trace).
  std::optional<uint64_t> lifetime_ns;
  // Tensors and views whose storage was created in the block while it was allocated, by
  // creation time.
  std::vector<TensorRecord> tensors;
  // What kept the storage, and so the block, alive longest (index into `tensors`): the view
  // released last when views shared it (a view holds its base, so the base's own release
  // follows its last view's), else the tensor released last; unreleased counts as the end.
  std::optional<size_t> kept_alive_by;
};

// The allocation whose alloc event has sequence number `seq`; empty when there is none.
std::optional<AllocationDetails> allocation_details(const Trace& trace, uint64_t seq);
// The same for a row already read.
AllocationDetails allocation_details(const Trace& trace, const store::AllocationRow& row);

// One tensor (or view): its own row, the block its storage lay in, and the views of it.
struct TensorDetails {
  TensorRecord tensor;  // sizes, strides, offset, dtype, op, create/release, stack, site
  int64_t device_id = 0;
  std::string device;
  std::vector<std::string> frames;      // the creation stack, symbolized, innermost first
  std::optional<uint64_t> lifetime_ns;  // release - create; empty: alive at the end
  uint64_t storage_addr = 0, storage_nbytes = 0;
  // The allocation whose block held the storage when it was created (its category, scope,
  // stream and the other tensors sharing it); empty when the storage or block is unknown.
  std::optional<AllocationDetails> allocation;
  std::vector<TensorRecord> views;  // tensors whose base is this one, by creation time
};
// The tensor with id `tensor_id` (its first tensor_create); empty when there is none.
std::optional<TensorDetails> tensor_details(const Trace& trace, uint64_t tensor_id);

// One scope_push ... scope_pop span of the scopes table.
struct ScopeSpan {
  uint64_t thread = 0;
  std::string name, path;  // path: the open scopes' names from the outermost, joined with '/'
  int depth = 0;           // 0: outermost
  uint64_t push_ts = 0;    // absolute
  std::optional<uint64_t> pop_ts;  // empty: never popped
};
// Scopes overlapping [from_ts, to_ts] (absolute), by push time. Empty when the trace has no
// scopes table.
std::vector<ScopeSpan> scopes(const Trace& trace, uint64_t from_ts, uint64_t to_ts);

}  // namespace tidemark::analysis
