// Pitfall 10: many DataLoader workers with a deep prefetch hold many batches in host memory.
//
// Each worker builds up to prefetch_factor batches ahead of the training loop, so
// num_workers * prefetch_factor finished batches can be alive at once -- and with pin_memory
// on a CUDA build they sit in page-locked memory, which the OS cannot swap and which the
// caching host allocator keeps once reserved. Raising num_workers "to go faster" multiplies
// that footprint while the loop, bounded by the device, gets no faster. The fix: as few
// workers as keep the device busy, and a shallow prefetch. (Without CUDA, pin_memory has no
// effect; the batches held ahead are the same.)
#include <chrono>
#include <thread>

#include <tensorlib/data/data.h>

#include "common.h"

namespace {

// Images "decoded" on demand, as a dataset of files would be: example i is a 3 x 64 x 64
// float image (48 KiB) with label i % 10.
class DecodedImages : public tl::data::Dataset {
 public:
  explicit DecodedImages(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  tl::data::Example get(int64_t i) const override {
    const double pixel = (static_cast<double>(i % 255) / 255.0 - 0.5) * 2.0;
    return {tl::full({3, 64, 64}, pixel), tl::full({}, i % 10, tl::kInt64)};
  }

 private:
  int64_t n_;
};

}  // namespace

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_dataloader_workers",
      "8 workers, prefetch_factor 4, pin_memory (fixed: 2 workers, prefetch_factor 2)", 40);
  const int64_t batch_size = 64;  // 3 MiB per batch
  tl::data::DataLoaderOptions options{.batch_size = batch_size,
                                      .shuffle = true,
                                      .num_workers = o.fixed ? 2 : 8,
                                      .prefetch_factor = o.fixed ? 2 : 4,
                                      .pin_memory = true,
                                      .seed = 0};
  tl::data::DataLoader loader(std::make_shared<DecodedImages>(batch_size * o.steps), options);
  tl::Tensor w = tl::full({3 * 64 * 64, 16}, 1e-3, o.device);

  pitfalls::Report report;  // host memory (what the prefetched batches hold), whatever --device
  report.take("before");
  double checksum = 0;
  for (auto& batch : loader) {
    tl::profiler::step();
    checksum += tl::matmul(batch.data.to(o.device).flatten(1), w).sum().item<double>();
    // Stands in for the device's time on the step, which bounds the loop on a GPU: well above
    // what a worker takes to build a batch, so the queues fill however loaded the machine is.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  report.take("after");
  std::printf("%d workers, prefetch_factor %d: checksum %.3f\n\n", options.num_workers,
              options.prefetch_factor, checksum);
  report.add("batch_bytes", batch_size * 3 * 64 * 64 * 4);
  report.add("batches_ahead", options.num_workers * options.prefetch_factor);
  report.print();
  return 0;
}
