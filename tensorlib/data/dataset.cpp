#include "tensorlib/data/dataset.h"

#include <vector>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/memory_category.h"

namespace tl::data {

namespace {
// Row indices as an int64 tensor over the caller's memory (index_select only reads it).
Tensor index_tensor(IntArrayRef indices) {
  return from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())},
                   kInt64);
}
}  // namespace

Example Dataset::get_batch(IntArrayRef indices) const {
  TL_CHECK(!indices.empty(), "Dataset::get_batch: expected at least one index");
  std::vector<Tensor> data, targets;
  data.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    data.push_back(std::move(e.data));
    targets.push_back(std::move(e.target));
  }
  NoGradGuard no_grad;
  return {stack(data), stack(targets)};
}

TensorDataset::TensorDataset(Tensor data, Tensor targets)
    : data_(std::move(data)), targets_(std::move(targets)) {
  TL_CHECK(data_.defined() && targets_.defined(), "TensorDataset: expected defined tensors");
  TL_CHECK(data_.dim() >= 1 && targets_.dim() >= 1,
           "TensorDataset: expected tensors with at least one dimension, got shapes ",
           data_.sizes(), " and ", targets_.sizes());
  TL_CHECK(data_.size(0) == targets_.size(0),
           "TensorDataset: size mismatch between tensors: data has ", data_.size(0),
           " rows, targets has ", targets_.size(0));
}

Example TensorDataset::get(int64_t index) const {
  TL_CHECK_INDEX(index >= 0 && index < size(), "TensorDataset: index ", index,
                 " is out of range for a dataset of size ", size());
  return {data_[index], targets_[index]};
}

Example TensorDataset::get_batch(IntArrayRef indices) const {
  TL_CHECK(!indices.empty(), "TensorDataset::get_batch: expected at least one index");
  for (int64_t i : indices) {
    TL_CHECK_INDEX(i >= 0 && i < size(), "TensorDataset: index ", i,
                   " is out of range for a dataset of size ", size());
  }
  NoGradGuard no_grad;
  Tensor idx = index_tensor(indices);
  return {data_.index_select(0, idx), targets_.index_select(0, idx)};
}

void announce_input(const Tensor& t) {
  set_memory_category(t, MemoryCategory::input);
}

}  // namespace tl::data
