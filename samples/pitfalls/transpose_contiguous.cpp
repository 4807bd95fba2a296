// Pitfall 9: transpose().contiguous() copies where a view would do.
//
// transpose() is free: a view with swapped strides. Calling contiguous() on it materialises
// a full copy, which is only needed by code that requires a dense layout. matmul accepts
// transposed operands directly (BLAS reads them through its transpose flag), so
// `matmul(a.t().contiguous(), b)` allocates and fills a temporary as large as `a` for nothing.
// The fix: `matmul(a.t(), b)`.
#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o =
      pitfalls::parse(argc, argv, "pitfall_transpose_contiguous",
                      "matmul(a.t().contiguous(), b) (fixed: matmul(a.t(), b))", 10);
  tl::manual_seed(0);
  tl::Tensor b = tl::randn({2048, 64}, o.device);
  pitfalls::Report report(o.device);
  report.take("before");
  auto before = tl::memory_stats(o.device);
  double checksum = 0;
  for (int step = 0; step < o.steps; ++step) {
    tl::profiler::step();
    tl::Tensor a = tl::randn({2048, 1024}, o.device);      // 8 MiB
    tl::Tensor at = o.fixed ? a.t() : a.t().contiguous();  // BUG unfixed: an 8 MiB copy
    tl::Tensor c = tl::matmul(at, b);
    checksum += c.sum().item<double>();
  }
  auto after = tl::memory_stats(o.device);
  report.take("after");
  std::printf("checksum %.3f\n\n", checksum);
  report.add("allocations", after["allocation.all.allocated"] - before["allocation.all.allocated"]);
  report.add("allocated_bytes_total",
             after["allocated_bytes.all.allocated"] - before["allocated_bytes.all.allocated"]);
  report.print();
  return 0;
}
