#include "tensorlib/nn/layers.h"

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"

namespace tl::nn::functional {

using autograd::variable_list;

Tensor dropout(const Tensor& input, double p, bool training) {
  TL_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return input;
  TL_CHECK(input.is_floating_point(), "dropout: expected a floating point input, got ",
           input.dtype());
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  Tensor dropped;  // bool: true where the element is zeroed
  Tensor out = autograd::forward_no_grad([&] {
    // Uniforms in float32 (24 random bits) whatever the input's dtype, so p keeps its meaning
    // for half inputs; u < p drops with probability p.
    dropped = tl::rand(input.sizes(), TensorOptions(kFloat32).device(input.device())).lt(p);
    Tensor y = input * scale;
    y.masked_fill_(dropped, 0);
    return y;
  });
  autograd::record(out, "NativeDropout", {&input}, {dropped},
                   [scale](const variable_list& g, const variable_list& s) {
                     Tensor gi = g[0] * scale;
                     return variable_list{gi.masked_fill_(s[0], 0)};
                   });
  return out;
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  TL_CHECK(weight.dim() == 2,
           "embedding: expected weight of shape [num_embeddings, "
           "embedding_dim], got ",
           weight.sizes());
  TL_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
           "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
           "Long, Int; but got ",
           indices.dtype(), " instead");
  const int64_t num = weight.size(0), dim = weight.size(1);
  if (padding_idx) {
    TL_CHECK(*padding_idx >= -num && *padding_idx < num,
             "embedding: padding_idx must be within num_embeddings (", num, "), got ",
             *padding_idx);
    if (*padding_idx < 0) *padding_idx += num;
  }
  Tensor flat = indices.to(kInt64).reshape({-1});
  std::vector<int64_t> out_shape = indices.sizes().vec();
  out_shape.push_back(dim);
  Tensor out =
      autograd::forward_no_grad([&] { return weight.index_select(0, flat).view(out_shape); });
  autograd::record(out, "Embedding", {&weight}, {flat},
                   [num, dim, padding_idx](const variable_list& g, const variable_list& s) {
                     const Tensor& idx = s[0];
                     Tensor rows = g[0].reshape({-1, dim});
                     if (padding_idx) rows = rows.masked_fill(idx.eq(*padding_idx).unsqueeze(1), 0);
                     Tensor gw = tl::zeros({num, dim}, rows.options());
                     gw.scatter_add_(0, idx.unsqueeze(1).expand({idx.size(0), dim}), rows);
                     return variable_list{gw};
                   });
  return out;
}

Tensor silu(const Tensor& input) {
  Tensor out = autograd::forward_no_grad([&] {
    Tensor y = input.sigmoid();
    y.mul_(input);
    return y;
  });
  autograd::record(out, "Silu", {&input}, {input},
                   [](const variable_list& g, const variable_list& s) {
                     // d/dx x*sigmoid(x) = sigmoid(x) * (1 + x * (1 - sigmoid(x))).
                     const Tensor& x = s[0];
                     Tensor sig = x.sigmoid();
                     Tensor d = (1 - sig) * x + 1;
                     return variable_list{g[0] * sig * d};
                   });
  return out;
}

}  // namespace tl::nn::functional

namespace tl::nn {

Dropout::Dropout(double p_) : Module("dropout"), p(p_) {
  TL_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
}

namespace {
std::optional<int64_t> normalised_padding(int64_t num, std::optional<int64_t> padding_idx) {
  if (!padding_idx) return padding_idx;
  TL_CHECK(*padding_idx >= -num && *padding_idx < num,
           "Embedding: padding_idx must be within num_embeddings (", num, "), got ", *padding_idx);
  return *padding_idx < 0 ? *padding_idx + num : *padding_idx;
}

Tensor embedding_init(int64_t num, int64_t dim, std::optional<int64_t> padding_idx) {
  TL_CHECK(num > 0 && dim > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ",
           num, " and ", dim);
  Tensor w = tl::randn({num, dim});
  if (padding_idx) w.select(0, *padding_idx).zero_();
  return w;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> padding)
    : Module("embedding"),
      num_embeddings(num),
      embedding_dim(dim),
      padding_idx(normalised_padding(num, padding)),
      weight(register_parameter("weight", embedding_init(num, dim, padding_idx))) {}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(indices, weight, padding_idx);
}

}  // namespace tl::nn
