// tl::data::Dataset, as torch.utils.data.Dataset: a sized, indexable collection of examples.
// DataLoader reads it from several threads at once, so get() and get_batch() are const and
// must be safe to call concurrently (reading tensors that never change is).
#pragma once

#include <cstdint>

#include "tensorlib/core/tensor.h"

namespace tl::data {

// One example, or a batch of them stacked along dim 0.
struct Example {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of examples.
  virtual int64_t size() const = 0;
  // Example `index`, 0 <= index < size().
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked along a new dim 0 (as PyTorch's default_collate). The
  // default stacks get(i); datasets backed by one tensor override it with an index_select.
  // The result owns its memory (never a view of the dataset).
  virtual Example get_batch(IntArrayRef indices) const;
};

// Examples are rows of `data` and `targets` (equal first dimension), as TensorDataset.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);

  int64_t size() const override { return data_.size(0); }
  // Views of row `index` (no copy).
  Example get(int64_t index) const override;
  Example get_batch(IntArrayRef indices) const override;

  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
};

// Tells the profiler that `t`'s block holds model input (a `category` event, Category::input).
// No-op when no sink is installed or `t` has no memory.
void announce_input(const Tensor& t);

}  // namespace tl::data
