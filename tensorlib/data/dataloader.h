// tl::data::DataLoader, as torch.utils.data.DataLoader: batches of a Dataset, optionally
// shuffled, optionally built ahead by worker threads.
//
//   tl::data::DataLoader loader(tl::data::FashionMNIST(), {.batch_size = 64, .shuffle = true,
//                                                         .num_workers = 2, .seed = 0});
//   for (auto& batch : loader) train_step(batch.data, batch.target);
//
// Note [DataLoader epochs and workers]
// Each begin() starts an epoch: a fresh, independent iteration (as PyTorch's iter(loader)).
// With shuffle, epoch e visits the indices in a permutation drawn from Philox under the
// loader's seed at a counter offset derived from e: the same seed gives the same sequence of
// epochs, and each epoch gets a new order. Batch k holds indices [k * batch_size, ...) of that
// order. With num_workers > 0, batch k is built by worker k % num_workers, at most
// prefetch_factor * num_workers batches ahead of the consumer, and batches are delivered in
// order, so the batches are identical whatever num_workers is (PyTorch's in_order=True). An
// exception in a worker is rethrown on the consumer thread when its batch is due. The
// iterator owns the epoch's threads: stopping early (break) or destroying the iterator stops
// the workers (each finishes the batch it is building) and joins them; the iterator keeps the
// dataset alive, so it may outlive the loader.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "tensorlib/data/dataset.h"

namespace tl::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  // Drop the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  // Threads building batches ahead; 0 builds each batch on the consumer thread when it is due.
  int num_workers = 0;
  // Batches built ahead per worker (ignored when num_workers is 0).
  int prefetch_factor = 2;
  // Places batches in page-locked host memory (Tensor::pin_memory) for faster, asynchronous
  // host-to-device copies. Without the CUDA backend or a device it has no effect: batches
  // stay in ordinary host memory, so the same code runs everywhere.
  bool pin_memory = false;
  // Shuffle seed. Unset: with shuffle, drawn from tl's default generator when the loader is
  // made, so tl::manual_seed() makes shuffling reproducible too (as PyTorch).
  std::optional<uint64_t> seed;
};

class DataLoader {
 public:
  struct EpochState;

  // An input iterator over one epoch's batches (data and target stacked along dim 0). Copies
  // share the epoch.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = Example*;
    using reference = Example&;

    Iterator() = default;
    Example& operator*() const;
    Example* operator->() const { return &**this; }
    // Fetches the next batch; rethrows a worker's exception for that batch.
    Iterator& operator++();
    bool operator==(const Iterator& other) const;

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<EpochState> state) : state_(std::move(state)) {}
    bool at_end() const;
    std::shared_ptr<EpochState> state_;
  };

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  // Takes a dataset by value (copy or move), e.g. DataLoader(FashionMNIST(), options).
  template <typename D>
  requires std::is_base_of_v<Dataset, std::decay_t<D>> DataLoader(D&& dataset,
                                                                  DataLoaderOptions options = {})
      : DataLoader(std::make_shared<const std::decay_t<D>>(std::forward<D>(dataset)), options) {}

  // Starts an epoch (Note [DataLoader epochs and workers]) and fetches its first batch.
  Iterator begin();
  Iterator end() { return Iterator(); }

  // Batches per epoch, as len(loader).
  int64_t size() const;
  // Epochs started so far.
  int64_t epoch() const { return epoch_; }
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  uint64_t seed() const { return seed_; }

  // The order in which epoch `epoch` visits the dataset (identity without shuffle).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace tl::data
