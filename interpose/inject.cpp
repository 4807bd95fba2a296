// libtidemark_inject.so's two exported entry points (docs/interpose.md). Nothing throws out
// of them; on any failure they print one line and the program runs on, untraced.
#include <atomic>

#include "interpose/activity.h"
#include "interpose/nvtx_inject.h"
#include "interpose/session.h"

namespace ti = tidemark::interpose;

namespace {

void before_stop() {
  ti::activity::stop();
}

}  // namespace

// Called by the CUDA driver at the first cuInit (CUDA_INJECTION64_PATH). Only CUPTI calls,
// threads and atexit: never CUDA itself.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return 1;
  if (!ti::ensure_recording()) return 1;
  ti::set_before_stop(before_stop);
  ti::activity::start(/*with_cupti=*/true);
  return 1;
}

// Called by NVTX at the first NVTX call (NVTX_INJECTION64_PATH), before CUDA may have started.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  if (!ti::ensure_recording()) return 0;  // NVTX turns its calls into no-ops
  return ti::nvtx::initialize(get_export_table);
}
