// The five collectives of the MPI backend, run under `mpirun -np 2` (and -np 1), against results
// computed by hand for two ranks and for a group of one; the errors bad input gets; the events
// a collective emits.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include <tensorlib/distributed/process_group.h>
#include <tensorlib/tensorlib.h>

#include "mpi_test_main.h"

#include "tensorlib/expect_error.h"

namespace {

using tl_test::error_of;

namespace dist = tl::distributed;
namespace ev = tidemark::events;
using mpi_test::values;
using tl::Tensor;

template <typename T>
class Collectives : public ::testing::Test {
 protected:
  static constexpr tl::ScalarType kType = std::is_same_v<T, float> ? tl::kFloat32 : tl::kFloat64;
  static Tensor make(const std::vector<double>& v) {
    return tl::tensor(v, tl::TensorOptions(tl::kFloat64)).to(kType);
  }
  void SetUp() override {
    if (dist::get_world_size() != 2) GTEST_SKIP() << "the hand-computed results are for 2 ranks";
  }
  int rank() const { return dist::get_rank(); }
};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Collectives, Dtypes);

TYPED_TEST(Collectives, AllReduceSumAvgMaxMin) {
  const int r = this->rank();
  // Rank 0 holds {1, 2, 0}, rank 1 {2, 4, -3.5}.
  auto mine = [&] { return this->make({1.0 + r, 2.0 * (r + 1), -3.5 * r}); };
  Tensor t = mine();
  dist::all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<double>{3, 6, -3.5}));
  EXPECT_EQ(t.dtype(), this->kType);
  t = mine();
  dist::all_reduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(values(t), (std::vector<double>{1.5, 3, -1.75}));
  t = mine();
  dist::all_reduce(t, dist::ReduceOp::max);
  EXPECT_EQ(values(t), (std::vector<double>{2, 4, 0}));
  t = mine();
  dist::all_reduce(t, dist::ReduceOp::min);
  EXPECT_EQ(values(t), (std::vector<double>{1, 2, -3.5}));
}

TYPED_TEST(Collectives, BroadcastFromEitherRank) {
  const int r = this->rank();
  Tensor t = r == 1 ? this->make({7, 8, 9, 10}).view({2, 2}) : tl::zeros({2, 2}, this->kType);
  const uint32_t v0 = t._version();
  dist::broadcast(t, 1);
  EXPECT_EQ(values(t), (std::vector<double>{7, 8, 9, 10}));
  EXPECT_EQ(t._version(), r == 1 ? v0 : v0 + 1) << "the receivers' tensors changed in place";
  Tensor u = this->make({double(r)});
  dist::broadcast(u, 0);
  EXPECT_EQ(values(u), (std::vector<double>{0}));
}

TYPED_TEST(Collectives, AllGather) {
  const int r = this->rank();
  Tensor in = this->make({10.0 * r + 1, 10.0 * r + 2});
  std::vector<Tensor> outs = {tl::empty({2}, this->kType), tl::empty({2}, this->kType)};
  dist::all_gather(outs, in);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(outs[1]), (std::vector<double>{11, 12}));
  Tensor flat = tl::empty({4}, this->kType);
  dist::default_group().all_gather_into_tensor(flat, in);
  EXPECT_EQ(values(flat), (std::vector<double>{1, 2, 11, 12}));
}

TYPED_TEST(Collectives, ReduceScatter) {
  const int r = this->rank();
  // Rank r passes {{1+r, 2+r}, {10+r, 20+r}}: rank 0 gets {1+2, 2+3}, rank 1 {10+11, 20+21}.
  std::vector<Tensor> ins = {this->make({1.0 + r, 2.0 + r}), this->make({10.0 + r, 20.0 + r})};
  Tensor out = tl::empty({2}, this->kType);
  dist::reduce_scatter(out, ins);
  EXPECT_EQ(values(out), r == 0 ? (std::vector<double>{3, 5}) : (std::vector<double>{21, 41}));
  dist::reduce_scatter(out, ins, dist::ReduceOp::avg);
  EXPECT_EQ(values(out),
            r == 0 ? (std::vector<double>{1.5, 2.5}) : (std::vector<double>{10.5, 20.5}));
  Tensor flat = this->make({1.0 + r, 2.0 + r, 10.0 + r, 20.0 + r});
  dist::default_group().reduce_scatter_tensor(out, flat, dist::ReduceOp::max);
  EXPECT_EQ(values(out), r == 0 ? (std::vector<double>{2, 3}) : (std::vector<double>{11, 21}));
}

// A group of one, at any world size.
template <typename T>
class CollectivesOfOne : public Collectives<T> {
 protected:
  void SetUp() override {}
};
TYPED_TEST_SUITE(CollectivesOfOne, Dtypes);

TYPED_TEST(CollectivesOfOne, AreTheIdentity) {
  // split by rank: every process is alone in its group.
  auto self = dist::default_group().split(this->rank());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->size(), 1);
  EXPECT_EQ(self->rank(), 0);
  EXPECT_GT(self->id(), 0u) << "a split group is not the default group";
  Tensor t = this->make({1.25, -2});
  self->all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<double>{1.25, -2}));
  self->all_reduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(values(t), (std::vector<double>{1.25, -2}));
  self->broadcast(t, 0);
  EXPECT_EQ(values(t), (std::vector<double>{1.25, -2}));
  std::vector<Tensor> outs = {tl::empty({2}, this->kType)};
  self->all_gather(outs, t);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{1.25, -2}));
  Tensor out = tl::empty({2}, this->kType);
  self->reduce_scatter(out, {t});
  EXPECT_EQ(values(out), (std::vector<double>{1.25, -2}));
  self->barrier();
}

TEST(Collectives, WorldOfOne) {
  if (dist::get_world_size() != 1) GTEST_SKIP() << "runs under mpirun -np 1";
  Tensor t = tl::tensor(std::vector<double>{3, 4});
  dist::all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<double>{3, 4}));
  dist::barrier();
}

TEST(Collectives, IntegersSum) {
  if (dist::get_world_size() != 2) GTEST_SKIP() << "the hand-computed results are for 2 ranks";
  Tensor t = tl::tensor(std::vector<int64_t>{int64_t{1} << 40, 5}) * (dist::get_rank() + 1);
  dist::all_reduce(t);
  EXPECT_EQ(t[0].item<int64_t>(), int64_t{3} << 40);
  EXPECT_EQ(t[1].item<int64_t>(), 15);
}

TEST(Collectives, BarrierWaitsForTheLastRank) {
  if (dist::get_world_size() != 2) GTEST_SKIP() << "needs 2 ranks";
  if (dist::get_rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  dist::barrier();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (dist::get_rank() == 0) {
    EXPECT_GE(waited, 0.2) << "rank 0 left the barrier before rank 1 came";
  }
}

TEST(CollectiveErrors, LocalBadInput) {
  Tensor m = tl::zeros({3, 2});
  EXPECT_NE(
      error_of([&] { dist::all_reduce(m.t()); }).find("all_reduce: the tensor must be contiguous"),
      std::string::npos);
  EXPECT_NE(
      error_of([&] { dist::all_reduce(Tensor()); }).find("all_reduce: the tensor is undefined"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              dist::all_reduce(tl::zeros({2}, tl::kInt64), dist::ReduceOp::avg);
            }).find("avg needs a floating-point tensor, got int64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dist::all_reduce(tl::zeros({2}, tl::kBFloat16));
            }).find("the mpi backend has no bfloat16"),
            std::string::npos);
  const int n = dist::get_world_size();
  EXPECT_NE(error_of([&] {
              dist::broadcast(tl::zeros({2}), n);
            }).find("broadcast: source rank " + std::to_string(n) + " is not in the group"),
            std::string::npos);
  std::vector<Tensor> too_few(n + 1, tl::zeros({2}));
  EXPECT_NE(error_of([&] {
              dist::all_gather(too_few, tl::zeros({2}));
            }).find(std::to_string(n + 1) + " outputs for a group of " + std::to_string(n)),
            std::string::npos);
  std::vector<Tensor> wrong_dtype(n, tl::zeros({2}, tl::kFloat64));
  EXPECT_NE(error_of([&] {
              dist::all_gather(wrong_dtype, tl::zeros({2}));
            }).find("output 0 is float64 but the input is float32"),
            std::string::npos);
  std::vector<Tensor> wrong_size(n, tl::zeros({3}));
  EXPECT_NE(error_of([&] {
              dist::reduce_scatter(tl::zeros({2}), wrong_size);
            }).find("input 0 has 3 elements"),
            std::string::npos);
}

TEST(CollectiveErrors, RanksThatDisagreeAllGetTheError) {
  if (dist::get_world_size() != 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = dist::get_rank();
  EXPECT_EQ(error_of([&] { dist::all_reduce(tl::zeros({2 + r})); }),
            "all_reduce: the ranks of the group passed tensors of different sizes (2 to 3 "
            "elements); every rank must pass the same shape");
  EXPECT_EQ(error_of([&] { dist::all_reduce(tl::zeros({2}, r ? tl::kFloat64 : tl::kFloat32)); }),
            "all_reduce: the ranks of the group passed different dtypes (float32 and float64)");
  EXPECT_NE(error_of([&] {
              if (r == 0) {
                dist::all_reduce(tl::zeros({2}));
              } else {
                dist::broadcast(tl::zeros({2}), 0);
              }
            }).find("called different collectives (all_reduce and broadcast)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dist::broadcast(tl::zeros({2}), r);
            }).find("different source ranks (0 and 1)"),
            std::string::npos);
  // Nothing ran: the group still works.
  Tensor t = tl::ones({2});
  dist::all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<double>{2, 2}));
}

TEST(CollectiveErrors, InitialisingTwice) {
  EXPECT_NE(error_of([] { dist::init_process_group("mpi"); }).find("already initialised"),
            std::string::npos);
}

class EventLog : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    if (e.kind != ev::Kind::sync && e.kind != ev::Kind::collective) return;
    std::lock_guard lock(mutex_);
    events.push_back(e);
  }
  std::mutex mutex_;
  std::vector<ev::Event> events;
};

TEST(CollectiveEvents, ACollectiveAndItsHostWait) {
  EventLog log;
  ASSERT_TRUE(ev::add_sink(&log));
  Tensor t = tl::ones({3, 4});
  dist::all_reduce(t);
  dist::barrier();
  ev::remove_sink(&log);
  ASSERT_EQ(log.events.size(), 4u);
  const ev::Event &wait = log.events[0], &c = log.events[1];
  EXPECT_EQ(wait.kind, ev::Kind::sync);
  EXPECT_EQ(wait.sync.kind, ev::SyncKind::collective);
  EXPECT_EQ(c.kind, ev::Kind::collective);
  EXPECT_EQ(c.collective.op, ev::CollectiveOp::all_reduce);
  EXPECT_EQ(c.collective.bytes, 48u);
  EXPECT_EQ(c.collective.group_size, uint32_t(dist::get_world_size()));
  EXPECT_EQ(c.collective.rank, uint32_t(dist::get_rank()));
  EXPECT_EQ(c.collective.group, 0u);
  EXPECT_EQ(c.collective.duration_ns, wait.sync.duration_ns);
  EXPECT_EQ(c.ts_ns, wait.ts_ns);
  EXPECT_EQ(c.seq, wait.seq + 1);
  EXPECT_EQ(log.events[3].collective.op, ev::CollectiveOp::barrier);
  EXPECT_EQ(log.events[3].collective.bytes, 0u);
}

}  // namespace

MPI_TEST_MAIN()
