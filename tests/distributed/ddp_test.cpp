// DistributedDataParallel under `mpirun -np 2`: replicas start equal, gradients are identical on
// every rank after every step (bit for bit) and equal the gradient of one process over the
// union of the ranks' batches, buckets are as PyTorch builds them, no_sync accumulates locally,
// a parameter left without a gradient is named.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include <tensorlib/distributed/ddp.h>
#include <tensorlib/distributed/process_group.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

#include "mpi_test_main.h"

namespace {

namespace dist = tl::distributed;
namespace nn = tl::nn;
namespace ev = tidemark::events;
using tl::Tensor;

// 4 -> 64 -> 4096 -> 3: parameters of 1 KiB, 256 B, 1 MiB, 16 KiB, 48 KiB and 12 B (float32).
std::shared_ptr<nn::Sequential> model() {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::Linear>(4, 64));
  s->push_back(std::make_shared<nn::Tanh>());
  s->push_back(std::make_shared<nn::Linear>(64, 4096));
  s->push_back(std::make_shared<nn::Tanh>());
  s->push_back(std::make_shared<nn::Linear>(4096, 3));
  return s;
}

// A copy with the same parameter values.
std::shared_ptr<nn::Sequential> copy_of(const nn::Module& m) {
  auto c = model();
  c->load_state_dict(m.state_dict());
  return c;
}

// The same data on every rank: batch `step` of 8 examples.
std::pair<Tensor, Tensor> batch(int step) {
  tl::manual_seed(1000 + step);
  Tensor x = tl::randn({8, 4});
  Tensor y = tl::randint(0, 3, {8});
  return {x, y};
}

// Rows rank, rank + size, ... (DistributedSampler's shard).
Tensor shard(const Tensor& t, int rank, int size) {
  std::vector<int64_t> rows;
  for (int64_t i = rank; i < t.size(0); i += size) rows.push_back(i);
  return t.index_select(0, tl::tensor(rows));
}

// Every rank's copy of `t` (all_gather).
std::vector<Tensor> gathered(const Tensor& t) {
  std::vector<Tensor> out;
  for (int r = 0; r < dist::get_world_size(); ++r) out.push_back(tl::empty_like(t));
  dist::all_gather(out, t.contiguous());
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

Tensor flat_grads(nn::Module& m) {
  std::vector<Tensor> g;
  for (const Tensor& p : m.parameters()) g.push_back(p.grad().reshape({-1}));
  return tl::cat(g);
}
Tensor flat_params(nn::Module& m) {
  std::vector<Tensor> g;
  for (const Tensor& p : m.parameters()) g.push_back(p.detach().reshape({-1}));
  return tl::cat(g);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a - b).abs().max().item<double>();
}

class DDP : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::get_world_size() != 2) GTEST_SKIP() << "runs under mpirun -np 2";
  }
  int rank() const { return dist::get_rank(); }
};

TEST_F(DDP, ReplicasStartFromRankZerosParameters) {
  tl::manual_seed(rank());  // different initialisations
  auto m = model();
  Tensor before = flat_params(*m).clone();
  nn::DistributedDataParallel ddp(m);
  auto all = gathered(flat_params(*m));
  EXPECT_TRUE(bitwise_equal(all[0], all[1]));
  if (rank() == 0) {
    EXPECT_TRUE(bitwise_equal(all[0], before)) << "rank 0's values were replaced";
  } else {
    EXPECT_FALSE(bitwise_equal(before, flat_params(*m))) << "rank 1 kept its own values";
  }
}

TEST_F(DDP, BucketsInReverseOrderFirstOneMiB) {
  // Reversed: 5 (12 B), 4 (48 KiB), 3 (16 KiB), 2 (1 MiB) reach the first bucket's 1 MiB;
  // then 1 (256 B) and 0 (1 KiB) fill the next, or one bucket each at a cap of 200 bytes.
  auto m = model();
  nn::DistributedDataParallel ddp(m);
  EXPECT_EQ(ddp.bucket_indices(), (std::vector<std::vector<size_t>>{{5, 4, 3, 2}, {1, 0}}));
  nn::DistributedDataParallel small(copy_of(*m), {.bucket_cap_mb = 200.0 / (1024 * 1024)});
  EXPECT_EQ(small.bucket_indices(), (std::vector<std::vector<size_t>>{{5, 4, 3, 2}, {1}, {0}}));
  ASSERT_EQ(small.bucket_tensors().size(), 3u);
  EXPECT_EQ(small.bucket_tensors()[0].numel(), 3 + 3 * 4096 + 4096 + 4096 * 64);
  for (const Tensor& b : small.bucket_tensors())
    EXPECT_EQ(tl::memory_category(b), tl::MemoryCategory::comm_buffer);
}

// The gradient check of every step, for a bucket cap.
void train_and_compare(int rank, double cap_mb) {
  tl::manual_seed(7);
  auto m = model();
  auto reference = copy_of(*m);  // one process, the union of the ranks' batches
  nn::DistributedDataParallel ddp(m, {.bucket_cap_mb = cap_mb});
  tl::optim::SGD opt(ddp.parameters(), {.lr = 0.1});
  tl::optim::SGD ref_opt(reference->parameters(), {.lr = 0.1});
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = batch(step);
    opt.zero_grad();
    nn::functional::cross_entropy(ddp(shard(x, rank, 2)), shard(y, rank, 2)).backward();
    ref_opt.zero_grad();
    nn::functional::cross_entropy((*reference)(x), y).backward();

    Tensor g = flat_grads(*m);
    auto all = gathered(g);
    ASSERT_TRUE(bitwise_equal(all[0], all[1])) << "step " << step << ": ranks' gradients differ";
    Tensor ref = flat_grads(*reference);
    EXPECT_LT(max_abs_diff(g, ref), 1e-6 + 1e-5 * ref.abs().max().item<double>())
        << "step " << step;
    opt.step();
    ref_opt.step();
  }
  EXPECT_LT(max_abs_diff(flat_params(*m), flat_params(*reference)), 1e-5);
}

TEST_F(DDP, GradientsIdenticalOnEveryRankAndEqualToOneProcess) {
  train_and_compare(rank(), 25);
}

TEST_F(DDP, SameWithSmallBuckets) {
  train_and_compare(rank(), 1e-9);
}

class CollectiveCount : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    if (e.kind != ev::Kind::collective) return;
    std::lock_guard lock(mutex_);
    bytes.push_back(e.collective.bytes);
  }
  std::mutex mutex_;
  std::vector<uint64_t> bytes;
};

TEST_F(DDP, NoSyncAccumulatesLocallyThenReducesTheSum) {
  tl::manual_seed(3);
  auto m = model();
  auto reference = copy_of(*m);
  nn::DistributedDataParallel ddp(m, {.bucket_cap_mb = 200.0 / (1024 * 1024)});
  auto [xa, ya] = batch(10);
  auto [xb, yb] = batch(11);
  CollectiveCount count;
  ASSERT_TRUE(ev::add_sink(&count));
  {
    auto guard = ddp.no_sync();
    nn::functional::cross_entropy(ddp(shard(xa, rank(), 2)), shard(ya, rank(), 2)).backward();
  }
  const size_t during_no_sync = count.bytes.size();
  // Locally, the gradient is this rank's own.
  auto local = copy_of(*reference);
  nn::functional::cross_entropy((*local)(shard(xa, rank(), 2)), shard(ya, rank(), 2)).backward();
  EXPECT_LT(max_abs_diff(flat_grads(*m), flat_grads(*local)), 1e-6);
  nn::functional::cross_entropy(ddp(shard(xb, rank(), 2)), shard(yb, rank(), 2)).backward();
  ev::remove_sink(&count);
  EXPECT_EQ(during_no_sync, 0u) << "no_sync issued a collective";
  // One all_reduce per bucket, of the bucket's bytes.
  std::vector<uint64_t> expected;
  for (const Tensor& b : ddp.bucket_tensors()) expected.push_back(b.nbytes());
  EXPECT_EQ(count.bytes, expected);

  // The reference: the mean over ranks of each rank's accumulated (a + b) gradient.
  for (int r = 0; r < 2; ++r) {
    nn::functional::cross_entropy((*reference)(shard(xa, r, 2)), shard(ya, r, 2)).backward();
    nn::functional::cross_entropy((*reference)(shard(xb, r, 2)), shard(yb, r, 2)).backward();
  }
  Tensor ref = flat_grads(*reference) / 2;
  Tensor g = flat_grads(*m);
  EXPECT_LT(max_abs_diff(g, ref), 1e-6 + 1e-5 * ref.abs().max().item<double>());
  auto all = gathered(g);
  EXPECT_TRUE(bitwise_equal(all[0], all[1]));
}

// Uses its first layer only.
class HalfUsed : public nn::Module {
 public:
  HalfUsed() {
    used = register_module("used", std::make_shared<nn::Linear>(2, 2));
    unused = register_module("unused", std::make_shared<nn::Linear>(2, 2));
  }
  Tensor forward(const Tensor& x) override { return (*used)(x); }
  std::shared_ptr<nn::Linear> used, unused;
};

TEST_F(DDP, AParameterWithoutAGradientIsNamed) {
  auto m = std::make_shared<HalfUsed>();
  nn::DistributedDataParallel ddp(m);
  ddp(tl::ones({1, 2})).sum().backward();
  try {
    ddp(tl::ones({1, 2}));
    FAIL() << "no error";
  } catch (const tl::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "DistributedDataParallel: the previous backward gave no gradient to 2 parameters "
              "(unused.weight, unused.bias), so their buckets were never reduced: every "
              "parameter that requires grad must take part in the loss");
  }
}

}  // namespace

MPI_TEST_MAIN()
