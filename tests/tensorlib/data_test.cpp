// tl::data: TensorDataset and the DataLoader (batching, drop_last, seeded shuffling, workers
// that deliver in order, early stop, errors from workers, and profiler categories).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tensorlib/data/data.h>
#include <tensorlib/tensorlib.h>

namespace {

namespace ev = tidemark::events;
using tl::Tensor;
using tl::data::DataLoader;
using tl::data::DataLoaderOptions;
using tl::data::Example;

// Rows [i, 1000 + i] with target i: a batch's targets name the indices it holds.
tl::data::TensorDataset numbered(int64_t n) {
  Tensor idx = tl::arange(n, tl::kInt64);
  Tensor data = tl::stack({idx, idx + 1000}, 1).to(tl::kFloat32);
  return tl::data::TensorDataset(data, idx);
}

std::vector<int64_t> values(const Tensor& t) {
  Tensor c = t.contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// The targets of every batch of one epoch, batch by batch.
std::vector<std::vector<int64_t>> one_epoch(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) out.push_back(values(batch.target));
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Only get() is defined, so batches go through Dataset::get_batch's default stacking. Slower
// for some indices so that workers finish out of order; throws for `bad` index; counts calls.
class SlowDataset : public tl::data::Dataset {
 public:
  explicit SlowDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    calls->fetch_add(1);
    if (i == bad_) throw std::runtime_error("cannot read example " + std::to_string(i));
    if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return {tl::full({2}, static_cast<double>(i)), tl::tensor({i}).squeeze()};
  }
  std::shared_ptr<std::atomic<int64_t>> calls = std::make_shared<std::atomic<int64_t>>(0);

 private:
  int64_t n_, bad_;
};

TEST(TensorDataset, RowsAreExamples) {
  auto ds = numbered(5);
  EXPECT_EQ(ds.size(), 5);
  Example e = ds.get(3);
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  EXPECT_EQ(e.data[1].item<double>(), 1003.0);
  Example b = ds.get_batch(std::vector<int64_t>{4, 0});
  EXPECT_EQ(b.data.sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(b.target), (std::vector<int64_t>{4, 0}));
  EXPECT_THROW(ds.get(5), tl::IndexError);
  EXPECT_THROW(tl::data::TensorDataset(tl::zeros({3, 2}), tl::zeros({4})), tl::Error);
}

TEST(DataLoader, BatchSizesAndDropLast) {
  auto ds = std::make_shared<tl::data::TensorDataset>(numbered(10));
  DataLoader keep(ds, {.batch_size = 4});
  EXPECT_EQ(keep.size(), 3);
  std::vector<int64_t> sizes;
  for (auto& batch : keep) {
    sizes.push_back(batch.data.size(0));
    EXPECT_EQ(batch.data.size(1), 2);
    EXPECT_EQ(batch.target.size(0), batch.data.size(0));
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(flat(one_epoch(keep)), values(tl::arange(10, tl::kInt64)));  // in order

  DataLoader drop(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(drop.size(), 2);
  auto batches = one_epoch(drop);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1], (std::vector<int64_t>{4, 5, 6, 7}));

  DataLoader exact(ds, {.batch_size = 5, .drop_last = true});
  EXPECT_EQ(one_epoch(exact).size(), 2u);
  DataLoader too_big(ds, {.batch_size = 11, .drop_last = true});
  EXPECT_TRUE(one_epoch(too_big).empty());
  DataLoader empty(tl::data::TensorDataset(tl::zeros({0, 2}), tl::zeros({0}, tl::kInt64)),
                   {.batch_size = 3, .num_workers = 2});
  EXPECT_EQ(empty.begin(), empty.end());
}

TEST(DataLoader, RejectsBadOptions) {
  auto ds = std::make_shared<tl::data::TensorDataset>(numbered(4));
  EXPECT_THROW(DataLoader(ds, {.batch_size = 0}), tl::Error);
  EXPECT_THROW(DataLoader(ds, {.num_workers = -1}), tl::Error);
  EXPECT_THROW(DataLoader(ds, {.num_workers = 1, .prefetch_factor = 0}), tl::Error);
}

TEST(DataLoader, ShuffleVisitsEveryIndexOncePerEpochInANewOrder) {
  DataLoader loader(numbered(103), {.batch_size = 8, .shuffle = true, .seed = 11});
  std::vector<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto order = flat(one_epoch(loader));
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, values(tl::arange(103, tl::kInt64))) << "epoch " << epoch;
    EXPECT_NE(order, sorted) << "epoch " << epoch << " was not shuffled";
    EXPECT_EQ(order, loader.epoch_order(epoch));
    orders.push_back(order);
  }
  EXPECT_EQ(loader.epoch(), 3);
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
}

TEST(DataLoader, ShuffleIsReproducibleGivenTheSeed) {
  auto ds = std::make_shared<tl::data::TensorDataset>(numbered(50));
  DataLoader a(ds, {.batch_size = 6, .shuffle = true, .seed = 42});
  DataLoader b(ds, {.batch_size = 6, .shuffle = true, .seed = 42});
  DataLoader c(ds, {.batch_size = 6, .shuffle = true, .seed = 43});
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto ea = one_epoch(a);
    EXPECT_EQ(ea, one_epoch(b));
    EXPECT_NE(ea, one_epoch(c));
  }
  // Without a seed, the loader draws one from the default generator (tl::manual_seed).
  tl::manual_seed(5);
  DataLoader d(ds, {.batch_size = 6, .shuffle = true});
  tl::manual_seed(5);
  DataLoader e(ds, {.batch_size = 6, .shuffle = true});
  EXPECT_EQ(d.seed(), e.seed());
  EXPECT_EQ(one_epoch(d), one_epoch(e));
}

TEST(DataLoader, AnUnshuffledLoaderLeavesTheDefaultGeneratorAlone) {
  tl::manual_seed(1);
  Tensor a = tl::randn({4});
  tl::manual_seed(1);
  DataLoader loader(numbered(8), {.batch_size = 4});
  EXPECT_EQ(one_epoch(loader).size(), 2u);
  EXPECT_TRUE(tl::equal(tl::randn({4}), a));
}

TEST(DataLoader, WorkersDeliverTheSameBatchesInTheSameOrder) {
  auto ds = std::make_shared<SlowDataset>(97);
  std::vector<std::vector<Example>> runs;
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, {.batch_size = 5,
                           .shuffle = true,
                           .num_workers = workers,
                           .prefetch_factor = 2,
                           .seed = 3});
    std::vector<Example> all;
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& batch : loader) all.push_back(batch);
    }
    runs.push_back(std::move(all));
  }
  ASSERT_EQ(runs[0].size(), 2u * 20u);
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_TRUE(tl::equal(runs[r][i].data, runs[0][i].data)) << "run " << r << " batch " << i;
      EXPECT_TRUE(tl::equal(runs[r][i].target, runs[0][i].target)) << "run " << r << " batch " << i;
    }
  }
}

TEST(DataLoader, WorkersPrefetchABoundedNumberOfBatches) {
  auto ds = std::make_shared<SlowDataset>(400);
  DataLoader loader(ds, {.batch_size = 4, .num_workers = 2, .prefetch_factor = 3});
  auto it = loader.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The consumer holds batch 0; workers may build batches 1..6 (2 workers x 3) and no more.
  EXPECT_LE(ds->calls->load(), 7 * 4);
  EXPECT_GE(ds->calls->load(), 2 * 4);
}

TEST(DataLoader, EarlyBreakStopsAndJoinsTheWorkers) {
  auto ds = std::make_shared<SlowDataset>(10000);
  DataLoader loader(ds, {.batch_size = 8, .num_workers = 3, .prefetch_factor = 4});
  int seen = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.size(0), 8);
    if (++seen == 3) break;
  }
  // The iterator is gone, so are its workers: nothing reads the dataset any more.
  const int64_t calls = ds->calls->load();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds->calls->load(), calls);
  EXPECT_LT(calls, (3 + 3 * 4 + 1) * 8);
  // A second epoch starts cleanly.
  EXPECT_EQ(one_epoch(loader).size(), 1250u);
}

TEST(DataLoader, DestroyingTheLoaderWhileIteratingIsSafe) {
  auto ds = std::make_shared<SlowDataset>(1000);
  auto loader =
      std::make_unique<DataLoader>(ds, DataLoaderOptions{.batch_size = 10, .num_workers = 2});
  auto it = loader->begin();
  loader.reset();  // the iterator keeps its epoch (and the dataset) alive
  EXPECT_EQ(values(it->target)[0], 0);
  ++it;
  EXPECT_EQ(values(it->target)[0], 10);
  // Destroying a loader with workers running and no iterator kept: nothing to wait for.
  auto other =
      std::make_unique<DataLoader>(ds, DataLoaderOptions{.batch_size = 10, .num_workers = 3});
  { auto running = other->begin(); }
  other.reset();
}

TEST(DataLoader, ADatasetErrorReachesTheConsumer) {
  for (int workers : {0, 2}) {
    auto ds = std::make_shared<SlowDataset>(100, /*bad=*/42);
    DataLoader loader(ds, {.batch_size = 10, .num_workers = workers});
    int delivered = 0;
    try {
      for (auto& batch : loader) {
        (void)batch;
        ++delivered;
      }
      ADD_FAILURE() << "no exception with " << workers << " workers";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "cannot read example 42");
    }
    EXPECT_EQ(delivered, 4) << workers << " workers";  // batches 0..3 came before the bad one
  }
}

class CategorySink final : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    if (e.kind != ev::Kind::category) return;
    std::lock_guard<std::mutex> lock(mu);
    if (e.category.category == ev::Category::input) input.insert(e.category.addr);
    ++count;
  }
  bool announced(const Tensor& t) {
    std::lock_guard<std::mutex> lock(mu);
    return input.count(reinterpret_cast<uint64_t>(t.storage()->data())) != 0;
  }
  std::mutex mu;
  std::set<uint64_t> input;
  int count = 0;
};

TEST(DataLoader, BatchesAreAnnouncedAsInput) {
  auto ds = std::make_shared<tl::data::TensorDataset>(numbered(40));
  for (int workers : {0, 2}) {
    CategorySink sink;
    ASSERT_TRUE(ev::add_sink(&sink));
    DataLoader loader(
        ds,
        {.batch_size = 8, .shuffle = true, .num_workers = workers, .pin_memory = true, .seed = 1});
    int batches = 0;
    for (auto& batch : loader) {
      EXPECT_TRUE(sink.announced(batch.data)) << "batch " << batches;
      EXPECT_TRUE(sink.announced(batch.target)) << "batch " << batches;
      ++batches;
    }
    ev::remove_sink(&sink);
    EXPECT_EQ(batches, 5);
    EXPECT_EQ(sink.count, 2 * 5) << workers << " workers";
  }
}

TEST(DataLoader, BatchesOwnTheirMemory) {
  auto ds = std::make_shared<tl::data::TensorDataset>(numbered(6));
  DataLoader loader(ds, {.batch_size = 1});
  for (auto& batch : loader) {
    EXPECT_NE(batch.data.storage().get(), ds->data().storage().get());
    batch.data.fill_(-1);
  }
  EXPECT_EQ(ds->data().min().item<double>(), 0.0);
}

}  // namespace
