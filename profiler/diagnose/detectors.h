// The detectors, one per finding id, each in the file named by its id (graph_retention.cpp for
// `graph-retention`); diagnose.cpp's list runs them. Internal: callers see diagnose.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "profiler/analysis/trace.h"
#include "profiler/diagnose/diagnose.h"

namespace tidemark::diagnose::detail {

// One detector: appends its findings, or a SkippedDetector saying why it could not run.
using DetectorFn = void (*)(const analysis::Trace& trace, Diagnosis& out);

void detect_graph_retention(const analysis::Trace& trace, Diagnosis& out);
void detect_view_retention(const analysis::Trace& trace, Diagnosis& out);
void detect_retained_graph(const analysis::Trace& trace, Diagnosis& out);
void detect_grad_in_eval(const analysis::Trace& trace, Diagnosis& out);
void detect_activation_peak(const analysis::Trace& trace, Diagnosis& out);
void detect_sync_in_loop(const analysis::Trace& trace, Diagnosis& out);
void detect_fragmentation(const analysis::Trace& trace, Diagnosis& out);
void detect_oom(const analysis::Trace& trace, Diagnosis& out);
void detect_cache_held(const analysis::Trace& trace, Diagnosis& out);
void detect_leak(const analysis::Trace& trace, Diagnosis& out);
void detect_copy_instead_of_view(const analysis::Trace& trace, Diagnosis& out);
void detect_pinned_growth(const analysis::Trace& trace, Diagnosis& out);
void detect_optimizer_peak(const analysis::Trace& trace, Diagnosis& out);
void detect_attention_peak(const analysis::Trace& trace, Diagnosis& out);
void detect_autocast_cache(const analysis::Trace& trace, Diagnosis& out);
void detect_stale_grads(const analysis::Trace& trace, Diagnosis& out);
void detect_kept_graph(const analysis::Trace& trace, Diagnosis& out);
void detect_hook_leak(const analysis::Trace& trace, Diagnosis& out);
void detect_cache_thrash(const analysis::Trace& trace, Diagnosis& out);
void detect_device_imbalance(const analysis::Trace& trace, Diagnosis& out);
// On a merged trace; skipped on one rank's trace (meta `rank`); silent on a trace of no
// distributed run. Several ranks' traces are compared by rank_imbalance.h.
void detect_rank_imbalance(const analysis::Trace& trace, Diagnosis& out);
// Replays the trace through tensorlib's caching allocator (profiler/replay).
void detect_allocator_settings(const analysis::Trace& trace, Diagnosis& out);

// Note [Checkpointing estimate] (activation_peak.cpp): layers in forward order, each with its
// activation bytes at the peak and its largest block (the output a segment would keep).
struct CheckpointLayer {
  int64_t bytes = 0, largest_block = 0;
};
struct CheckpointEstimate {
  size_t k = 0, segments = 0;        // 0: no segmentation saves anything
  int64_t before = 0, after = 0;     // activation bytes at the peak without and with it
  int64_t outputs = 0, largest = 0;  // after = outputs kept + the largest segment
};
CheckpointEstimate checkpoint_estimate(const std::vector<CheckpointLayer>& layers);

}  // namespace tidemark::diagnose::detail
