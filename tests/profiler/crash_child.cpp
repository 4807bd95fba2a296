// A recording program for the crash test: records (without finalizing) while it makes tensors
// and numbered steps forever, prints "ready" once 50 steps are committed, and waits to be
// killed. Usage: recorder_crash_child TRACE
#include <cstdio>

#include <tensorlib/tensorlib.h>

#include "profiler/record/recorder.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: recorder_crash_child TRACE\n");
    return 2;
  }
  tidemark::record::Options o;
  o.path = argv[1];
  o.finalize = false;
  tidemark::record::start(o);
  for (uint64_t i = 1;; ++i) {
    tl::profiler::step();
    tl::Tensor a = tl::randn({32, 32});
    tl::Tensor b = a.t().matmul(a).relu();
    if (i == 50) {
      tidemark::record::flush();
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
}
