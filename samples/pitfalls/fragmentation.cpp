// Pitfall 7: growing batch shapes leave reserved memory far above allocated.
//
// With variable input sizes (sequence lengths that grow, the last smaller batch, dynamic
// shapes) each new, larger request no longer fits in the cached blocks the previous steps
// freed, so the allocator reserves a new segment and keeps the old ones cached: reserved
// memory climbs to many times what is ever allocated at once ("reserved but unallocated"),
// which is how an out-of-memory error can report gigabytes free in the cache. The fix, as in
// PyTorch: expandable segments (TL_ALLOC_CONF=expandable_segments:True, the analogue of
// PYTORCH_CUDA_ALLOC_CONF), where one segment per pool grows and freed pages are reused for
// the larger request.
#include <cstdlib>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_fragmentation",
      "activations of a growing sequence length (fixed: TL_ALLOC_CONF=expandable_segments:True)",
      8);
  // The allocator reads TL_ALLOC_CONF when the device is first used, so this must come first.
  if (o.fixed) setenv("TL_ALLOC_CONF", "expandable_segments:True", 1);
  tl::manual_seed(0);
  const int64_t batch = 4, hidden = 1024;  // 16 KiB per sequence position
  tl::Tensor w = tl::randn({hidden, hidden}, o.device) / 32;
  pitfalls::Report report(o.device);
  report.take("before");
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    const int64_t seq = 704 + 64 * step;  // 11 MiB, 12 MiB, ... per activation
    tl::Tensor x = tl::randn({batch, seq, hidden}, o.device);
    tl::Tensor h = tl::matmul(x, w);
    (void)h.sum().item<float>();
  }
  report.take("after");
  report.add("reserved_unallocated_bytes", report.reserved("after") - report.allocated("after"));
  report.print();
  return 0;
}
