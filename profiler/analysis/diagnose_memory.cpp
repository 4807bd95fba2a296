// Detectors of graphs, leaks and syncs (profiler/analysis/diagnose.h).
#include "profiler/analysis/diagnose.h"

namespace tidemark::analysis::detail {

namespace {
void not_built(const char* id, Diagnosis& out) {
  out.skipped.push_back({id, "this detector is not implemented yet"});
}
}  // namespace

void detect_leak(const Trace&, Diagnosis& out) {
  not_built("leak", out);
}
void detect_graph_retention(const Trace&, Diagnosis& out) {
  not_built("graph-retention", out);
}
void detect_retained_graph(const Trace&, Diagnosis& out) {
  not_built("retained-graph", out);
}
void detect_grad_in_eval(const Trace&, Diagnosis& out) {
  not_built("grad-in-eval", out);
}
void detect_sync_in_loop(const Trace&, Diagnosis& out) {
  not_built("sync-in-loop", out);
}

}  // namespace tidemark::analysis::detail
