// Detectors of views, copies and the allocator (profiler/analysis/diagnose.h).
#include "profiler/analysis/diagnose.h"

namespace tidemark::analysis::detail {

namespace {
void not_built(const char* id, Diagnosis& out) {
  out.skipped.push_back({id, "this detector is not implemented yet"});
}
}  // namespace

void detect_view_retention(const Trace&, Diagnosis& out) {
  not_built("view-retention", out);
}
void detect_copy_instead_of_view(const Trace&, Diagnosis& out) {
  not_built("copy-instead-of-view", out);
}
void detect_fragmentation(const Trace&, Diagnosis& out) {
  not_built("fragmentation", out);
}
void detect_cache_held(const Trace&, Diagnosis& out) {
  not_built("cache-held", out);
}
void detect_pinned_growth(const Trace&, Diagnosis& out) {
  not_built("pinned-growth", out);
}

}  // namespace tidemark::analysis::detail
