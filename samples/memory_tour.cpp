// A short tour of allocated vs reserved memory: create tensors, take views, free them, and
// watch what the caching allocator holds. This is what `make demo` runs.
#include <cstdio>

#include <tensorlib/tensorlib.h>

namespace {

void report(const char* what) {
  const tl::Device cpu("cpu");
  std::printf("%-52s allocated %9.2f MiB   reserved %9.2f MiB\n", what,
              tl::memory_allocated(cpu) / 1048576.0, tl::memory_reserved(cpu) / 1048576.0);
}

}  // namespace

int main() {
  tl::manual_seed(0);
  report("start");
  {
    tl::Tensor a = tl::randn({1024, 1024});  // 4 MiB: large pool, one 20 MiB segment
    report("a = randn(1024, 1024)            (4 MiB)");
    tl::Tensor b = tl::randn({1024, 1024});
    report("b = randn(1024, 1024)            (4 MiB, same segment)");
    tl::Tensor at = a.t();
    tl::Tensor row = a[3];
    report("at = a.t(), row = a[3]           (views: no memory)");
    tl::Tensor c = tl::matmul(at, b);
    report("c = at @ b                       (4 MiB result)");
    tl::Tensor big = tl::zeros({64, 1024, 1024}, tl::kFloat32);  // 256 MiB: its own segment
    report("big = zeros(64, 1024, 1024)      (256 MiB)");
    tl::Tensor slice = big.narrow(0, 0, 1);
    big = tl::Tensor();
    report("big dropped, slice = big[0:1] kept: storage lives on");
    slice = tl::Tensor();
    report("slice dropped: block cached, still reserved");
    std::printf("  sum of c = %.4f, row[0] = %.4f\n", c.sum().item<double>(),
                row[0].item<double>());
  }
  report("all tensors dropped");
  tl::empty_cache(tl::Device("cpu"));
  report("empty_cache()");

  auto stats = tl::memory_stats(tl::Device("cpu"));
  std::printf("\npeak allocated %.2f MiB, peak reserved %.2f MiB, %lld device allocations\n",
              stats["allocated_bytes.all.peak"] / 1048576.0,
              stats["reserved_bytes.all.peak"] / 1048576.0,
              static_cast<long long>(stats["num_device_alloc"]));
  return 0;
}
