// Pitfall 6: empty_cache() releases nothing while tensors are still referenced.
//
// empty_cache() returns *cached* memory -- blocks no tensor uses -- to the device. Memory that
// tensors still hold (kept in a list of outputs, a dict of intermediate results, a closure) is
// allocated, not cached, so empty_cache() cannot touch it: reserved memory stays where it was.
// The fix is to drop the references first (clear the list); then empty_cache() can return the
// segments.
#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_empty_cache_referenced",
      "empty_cache() with the outputs still in a list (fixed: clear the list first)", 8);
  tl::manual_seed(0);
  const tl::Device device = o.device;
  pitfalls::Report report(device);
  report.take("before");
  std::vector<tl::Tensor> outputs;
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor x = tl::randn({1536, 1024}, device);  // 6 MiB
    outputs.push_back((x * 2).relu());               // kept "for later"
  }
  report.take("after_work");
  if (o.fixed) outputs.clear();  // the fix: nothing references the outputs any more
  tl::empty_cache(device);
  report.take("after_empty_cache");
  report.add("released_bytes",
             report.reserved("after_work") - report.reserved("after_empty_cache"));
  report.add("still_referenced_bytes", report.allocated("after_empty_cache"));
  report.print();
  return 0;
}
