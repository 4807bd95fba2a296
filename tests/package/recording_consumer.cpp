// Records a few tensors into the trace named on the command line through the installed
// Tidemark::record, and prints how many events it wrote.
#include <profiler/record/recorder.h>
#include <tensorlib/tensorlib.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: recording_consumer TRACE\n";
    return 2;
  }
  tidemark::record::Options options;
  options.path = argv[1];
  tidemark::record::start(options);
  {
    tl::Tensor a = tl::randn({256, 256});
    tl::Tensor b = tl::matmul(a, a).relu();
    std::cout << "sum " << (b.sum().item<float>() >= 0) << "\n";
  }
  tidemark::record::RecordingStats stats = tidemark::record::stop();
  std::cout << "events " << stats.events << "\n";
  return stats.events > 0 ? 0 : 1;
}
