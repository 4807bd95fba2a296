// tl::distributed's costs, run as `mpirun -np 2 ddp_bench` (docs/performance.md): an all_reduce
// of 64 MiB between the ranks against two memcpy's of 64 MiB in the same run (an all_reduce of
// two ranks moves each byte out and back at least once), and a DistributedDataParallel step of
// the Fashion-MNIST MLP against the same step in one process. A plain program rather than a
// Google Benchmark one: every rank must run the same number of collectives. One thread per
// rank; each figure is the median of its repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include <tensorlib/distributed/distributed.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

#include "../../samples/fashion_models.h"

namespace {

namespace dist = tl::distributed;

// Median seconds of `reps` runs of fn, after `warmup` unmeasured ones; ranks start together.
double median_seconds(int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void allreduce_vs_memcpy(int rank) {
  constexpr int64_t kBytes = int64_t{64} << 20;
  tl::Tensor t = tl::ones({kBytes / 4});
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  const double reduce = median_seconds(2, 10, [&] { dist::all_reduce(t); });
  const double copies = median_seconds(2, 10, [&] {
    std::memcpy(b.data(), a.data(), kBytes);
    std::memcpy(a.data(), b.data(), kBytes);
  });
  if (rank == 0)
    std::printf(
        "all_reduce 64 MiB float32, %d ranks: %.1f ms; two memcpy's of 64 MiB: %.1f ms; "
        "ratio %.2f\n",
        dist::get_world_size(), reduce * 1e3, copies * 1e3, reduce / copies);
}

double step_seconds(tl::nn::Module& model, int64_t batch) {
  tl::manual_seed(0);
  tl::optim::Adam opt(model.parameters(), {.lr = 1e-3});
  tl::Tensor x = tl::randn({batch, 1, 28, 28});
  tl::Tensor y = tl::randint(0, 10, {batch});
  return median_seconds(5, 50, [&] {
    opt.zero_grad();
    tl::nn::functional::cross_entropy(model(x), y).backward();
    opt.step();
  });
}

void ddp_vs_one_process(int rank) {
  // One process alone (the other ranks wait in the barriers), then every rank under DDP.
  auto single = samples::make_mlp();
  double alone = 0;
  {
    tl::manual_seed(0);
    tl::optim::Adam opt(single->parameters(), {.lr = 1e-3});
    tl::Tensor x = tl::randn({64, 1, 28, 28});
    tl::Tensor y = tl::randint(0, 10, {64});
    alone = median_seconds(5, 50, [&] {
      if (rank != 0) return;
      opt.zero_grad();
      tl::nn::functional::cross_entropy((*single)(x), y).backward();
      opt.step();
    });
  }
  auto ddp = std::make_shared<tl::nn::DistributedDataParallel>(samples::make_mlp());
  const int n = dist::get_world_size();
  const double same_global = step_seconds(*ddp, 64 / n);
  const double same_local = step_seconds(*ddp, 64);
  if (rank == 0)
    std::printf(
        "MLP step, batch 64, one process: %.2f ms; DDP on %d ranks, %d per rank (the same "
        "64 per step): %.2f ms (ratio %.2f); DDP, 64 per rank (%d per step): %.2f ms "
        "(ratio %.2f)\n",
        alone * 1e3, n, 64 / n, same_global * 1e3, same_global / alone, 64 * n, same_local * 1e3,
        same_local / alone);
}

}  // namespace

int main() {
  try {
    tl::set_num_threads(1);
    dist::init_process_group("mpi");
    const int rank = dist::get_rank();
    allreduce_vs_memcpy(rank);
    ddp_vs_one_process(rank);
    dist::destroy_process_group();
  } catch (const tl::Error& e) {
    std::fprintf(stderr, "ddp_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
