// Pitfall 2: a small view keeps its whole storage alive.
//
// `big[0]` is a view: it shares `big`'s storage. Keeping such views (one row per batch for
// later inspection, say) keeps every batch's full storage allocated, although only a row of
// each is ever used. The fix: keep `big[0].clone()`, a copy that owns just the row.
#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o =
      pitfalls::parse(argc, argv, "pitfall_view_retention",
                      "keeping big[0] of 4 MiB tensors in a list (fixed: big[0].clone())", 16);
  tl::manual_seed(0);
  const int64_t rows = 1024, cols = 1024;  // 4 MiB of float32 per batch
  pitfalls::Report report(o.device);
  report.take("before");
  {
    std::vector<tl::Tensor> kept;
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor big = tl::randn({rows, cols}, o.device);
      tl::Tensor row = big[0];
      kept.push_back(o.fixed ? row.clone() : row);  // BUG unfixed: the view pins all of big
    }
    report.take("after");
    report.add("retained_bytes", report.allocated("after") - report.allocated("before"));
    report.add("big_tensor_bytes", rows * cols * 4);
    report.add("kept_view_bytes", static_cast<int64_t>(kept.size()) * cols * 4);
  }
  report.take("end");
  report.print();
  return 0;
}
