// The Summary view's content: peaks and counts per device (analysis::summarize) and the
// findings of diagnose::diagnose() -- the same as `tidemark summary` and `tidemark diagnose`.
#pragma once

#include <QString>

#include "gui/models/trace_data.h"

namespace tidemark::gui {

// Before Stage::tables (or ::complete for the findings) the missing parts say "computing…".
QString summary_html(const TraceData& data);
// The Summary view while following a trace being recorded: what was read so far.
QString follow_html(const TraceData& data);

// The Details view of one allocation: sizes, times (relative to `origin_ns`), lifetime, stream,
// category, scope, stack, and the tensors and views that shared its storage, naming the one
// that kept it alive longest.
QString details_html(const analysis::AllocationDetails& d, uint64_t origin_ns);

// The Details view of one tensor: sizes, strides, dtype, op, lifetime, its storage and the
// block that held it (category, scope, stream), its creation stack, its views and the other
// tensors sharing the block.
QString tensor_details_html(const analysis::TensorDetails& d, uint64_t origin_ns);

}  // namespace tidemark::gui
