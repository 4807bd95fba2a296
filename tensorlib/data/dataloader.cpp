#include "tensorlib/data/dataloader.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/generator.h"

namespace tl::data {

namespace {
// Philox counters reserved per epoch: an epoch of n indices uses ceil((n - 1) / 2) of them, so
// epochs never share random numbers for datasets below 2^41 examples.
constexpr uint64_t kCountersPerEpochLog2 = 40;
}  // namespace

// One epoch's iteration: its order, its workers and the batches they built
// (Note [DataLoader epochs and workers]).
struct DataLoader::EpochState {
  struct Built {
    Example batch;
    std::exception_ptr error;
  };

  EpochState(std::shared_ptr<const Dataset> ds, std::vector<int64_t> ord,
             const DataLoaderOptions& o)
      : dataset(std::move(ds)),
        order(std::move(ord)),
        batch_size(o.batch_size),
        num_workers(o.num_workers),
        pin(o.pin_memory && tl::detail::cuda_hooks() != nullptr &&
            tl::detail::cuda_hooks()->is_available()),
        window(static_cast<int64_t>(o.num_workers) * o.prefetch_factor) {
    const auto n = static_cast<int64_t>(order.size());
    num_batches = o.drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
    try {
      for (int w = 0; w < num_workers && w < num_batches; ++w) {
        workers.emplace_back([this, w] { worker_loop(w); });
      }
    } catch (...) {
      shutdown();
      throw;
    }
  }
  ~EpochState() { shutdown(); }
  EpochState(const EpochState&) = delete;
  EpochState& operator=(const EpochState&) = delete;

  Example build(int64_t k) const {
    const int64_t begin = k * batch_size;
    const int64_t len = std::min<int64_t>(batch_size, static_cast<int64_t>(order.size()) - begin);
    Example b = dataset->get_batch(IntArrayRef(order.data() + begin, static_cast<size_t>(len)));
    if (pin) {  // page-locked batches: their copies to the GPU can be asynchronous
      if (b.data.defined() && b.data.is_cpu()) b.data = b.data.pin_memory();
      if (b.target.defined() && b.target.is_cpu()) b.target = b.target.pin_memory();
    }
    announce_input(b.data);
    announce_input(b.target);
    return b;
  }

  void worker_loop(int w) {
    NoGradGuard no_grad;
    for (int64_t k = w; k < num_batches; k += num_workers) {
      {
        std::unique_lock<std::mutex> lock(mu);
        room_cv.wait(lock, [&] { return stop || k < consumed + window; });
        if (stop) return;
      }
      Built b;
      try {
        b.batch = build(k);
      } catch (...) {
        b.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
        built.emplace(k, std::move(b));
      }
      built_cv.notify_all();
    }
  }

  // Makes batch `next` current; false at the end of the epoch.
  bool advance() {
    current = Example();
    if (next >= num_batches) {
      done = true;
      return false;
    }
    const int64_t k = next++;
    if (num_workers == 0) {
      NoGradGuard no_grad;
      current = build(k);
      return true;
    }
    Built b;
    {
      std::unique_lock<std::mutex> lock(mu);
      built_cv.wait(lock, [&] { return built.count(k) != 0; });
      auto it = built.find(k);
      b = std::move(it->second);
      built.erase(it);
      consumed = k + 1;
    }
    room_cv.notify_all();
    if (b.error) std::rethrow_exception(b.error);
    current = std::move(b.batch);
    return true;
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    room_cv.notify_all();
    for (std::thread& t : workers) {
      if (t.joinable()) t.join();
    }
    workers.clear();
    built.clear();
  }

  const std::shared_ptr<const Dataset> dataset;
  const std::vector<int64_t> order;
  const int64_t batch_size;
  const int num_workers;
  const bool pin;        // pin_memory asked for and a CUDA device present
  const int64_t window;  // batches that may be built or waiting ahead of the consumer
  int64_t num_batches = 0;

  // Consumer thread only.
  int64_t next = 0;
  Example current;
  bool done = false;

  // Shared with the workers, under mu.
  std::mutex mu;
  std::condition_variable room_cv;   // consumed advanced, or stop
  std::condition_variable built_cv;  // a batch was built
  bool stop = false;
  int64_t consumed = 0;
  std::map<int64_t, Built> built;
  std::vector<std::thread> workers;
};

Example& DataLoader::Iterator::operator*() const {
  TL_CHECK(!at_end(), "DataLoader: dereferenced an iterator at the end of the epoch");
  return state_->current;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TL_CHECK(!at_end(), "DataLoader: incremented an iterator at the end of the epoch");
  state_->advance();
  return *this;
}

bool DataLoader::Iterator::at_end() const {
  return !state_ || state_->done;
}

bool DataLoader::Iterator::operator==(const Iterator& other) const {
  if (at_end() || other.at_end()) return at_end() == other.at_end();
  return state_ == other.state_;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  TL_CHECK(dataset_ != nullptr, "DataLoader: expected a dataset, got null");
  TL_CHECK(options_.batch_size >= 1, "DataLoader: batch_size should be a positive integer, got ",
           options_.batch_size);
  TL_CHECK(options_.num_workers >= 0, "DataLoader: num_workers option should be non-negative, got ",
           options_.num_workers);
  TL_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor should be positive, got ",
           options_.prefetch_factor);
  if (options_.seed) {
    seed_ = *options_.seed;
  } else if (options_.shuffle) {
    // As PyTorch's RandomSampler: a seed drawn from the default generator.
    PhiloxGenerator& gen = default_generator();
    auto r = PhiloxGenerator::block(gen.seed(), gen.reserve(1));
    seed_ = (static_cast<uint64_t>(r[0]) << 32) | r[1];
  }
}

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size();
  return options_.drop_last ? n / options_.batch_size
                            : (n + options_.batch_size - 1) / options_.batch_size;
}

// Fisher-Yates over Philox numbers (as torch.randperm on the CPU). Each draw takes 64 random
// bits and maps them to [0, i] by a multiply-shift, whose bias (below i / 2^64) is negligible.
std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  TL_CHECK(n >= 0, "DataLoader: dataset size is negative (", n, ")");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!options_.shuffle || n < 2) return order;
  const uint64_t base = static_cast<uint64_t>(epoch) << kCountersPerEpochLog2;
  std::array<uint32_t, 4> r{};
  uint64_t draw = 0;
  for (int64_t i = n - 1; i > 0; --i, ++draw) {
    if (draw % 2 == 0) r = PhiloxGenerator::block(seed_, base + draw / 2);
    const size_t h = (draw % 2) * 2;
    const uint64_t bits = (static_cast<uint64_t>(r[h]) << 32) | r[h + 1];
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataLoader::Iterator DataLoader::begin() {
  auto state = std::make_shared<EpochState>(dataset_, epoch_order(epoch_++), options_);
  state->advance();
  return Iterator(std::move(state));
}

}  // namespace tl::data
