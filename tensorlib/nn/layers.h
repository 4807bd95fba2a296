// Layers beyond Linear: dropout, embedding and SiLU, with PyTorch's semantics and defaults.
#pragma once

#include <optional>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"

namespace tl::nn::functional {

// Inverted dropout: in training, zeroes each element with probability p (drawn from tl's
// default generator, so tl::manual_seed makes it repeatable) and scales the rest by
// 1 / (1 - p); p = 1 gives zeros. Outside training, returns the input itself. Backward saves
// only the keep mask (one byte per element).
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);

// Rows of `weight` [num_embeddings, embedding_dim] at `indices` (int64 or int32, any shape):
// the result has shape indices.shape + [embedding_dim]. Rows looked up at padding_idx receive
// no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);

// x * sigmoid(x).
Tensor silu(const Tensor& input);

}  // namespace tl::nn::functional

namespace tl::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return functional::dropout(x, p, training_); }
  double p;
};

// torch.nn.Embedding: weight initialised N(0, 1), the padding row (if any) zeroed.
// padding_idx may be negative (counted from the end), as PyTorch.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalised to [0, num_embeddings)
  Tensor& weight;
};

class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return functional::silu(x); }
};

}  // namespace tl::nn
