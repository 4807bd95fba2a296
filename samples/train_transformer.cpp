// Trains a small decoder-only Transformer (token and position embeddings, causal multi-head
// attention with explicit B x H x S x S scores, a GELU MLP, pre-norm residual blocks, cross
// entropy, AdamW) to continue a sequence whose every token is the one before it plus one,
// modulo the vocabulary. Its memory grows with the batch (every activation), with the sequence
// length (linearly, and the attention scores quadratically) and not with either for the weights
// and AdamW's state: the program `tidemark predict` is tested on (docs/predict.md).
//
//   train_transformer --batch-size 8 --seq-len 64 --steps 20
//   tidemark record -o s64.db -- train_transformer --seq-len 64
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <memory>

#include <tensorlib/nn/layers.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/nn/norm.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

namespace {

namespace nn = tl::nn;

struct Config {
  int64_t vocab = 96, d_model = 64, heads = 4, layers = 2, max_seq = 4096;
};

class Attention : public nn::Module {
 public:
  Attention(int64_t d_model, int64_t heads) : heads_(heads), head_dim_(d_model / heads) {
    qkv_ = register_module("qkv", std::make_shared<nn::Linear>(d_model, 3 * d_model));
    out_ = register_module("out", std::make_shared<nn::Linear>(d_model, d_model));
  }
  tl::Tensor forward(const tl::Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), d = x.size(2);
    // (B, S, 3, H, Dh) -> three (B, H, S, Dh)
    tl::Tensor qkv = qkv_->forward(x).view({b, s, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});
    tl::Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
    // The scores: B x H x S x S, masked to the past.
    tl::Tensor scores =
        q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
    tl::Tensor pos = tl::arange(s, tl::TensorOptions(tl::kInt64).device(x.device()));
    tl::Tensor future = pos.view({1, s}).gt(pos.view({s, 1}));
    tl::Tensor weights = scores.masked_fill(future, -1e9).softmax(-1);
    tl::Tensor y = weights.matmul(v).transpose(1, 2).reshape({b, s, d});
    return out_->forward(y);
  }

 private:
  int64_t heads_, head_dim_;
  std::shared_ptr<nn::Linear> qkv_, out_;
};

class Block : public nn::Module {
 public:
  Block(int64_t d_model, int64_t heads) {
    norm1_ =
        register_module("norm1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{d_model}));
    attn_ = register_module("attn", std::make_shared<Attention>(d_model, heads));
    norm2_ =
        register_module("norm2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{d_model}));
    up_ = register_module("up", std::make_shared<nn::Linear>(d_model, 4 * d_model));
    down_ = register_module("down", std::make_shared<nn::Linear>(4 * d_model, d_model));
  }
  tl::Tensor forward(const tl::Tensor& x) override {
    tl::Tensor h = x + attn_->forward(norm1_->forward(x));
    return h + down_->forward(tl::gelu(up_->forward(norm2_->forward(h))));
  }

 private:
  std::shared_ptr<nn::LayerNorm> norm1_, norm2_;
  std::shared_ptr<Attention> attn_;
  std::shared_ptr<nn::Linear> up_, down_;
};

class Transformer : public nn::Module {
 public:
  explicit Transformer(const Config& c) {
    tokens_ = register_module("tokens", std::make_shared<nn::Embedding>(c.vocab, c.d_model));
    positions_ =
        register_module("positions", std::make_shared<nn::Embedding>(c.max_seq, c.d_model));
    for (int64_t i = 0; i < c.layers; ++i)
      blocks_.push_back(register_module("block" + std::to_string(i),
                                        std::make_shared<Block>(c.d_model, c.heads)));
    norm_ =
        register_module("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.d_model}));
    head_ = register_module("head", std::make_shared<nn::Linear>(c.d_model, c.vocab));
  }
  tl::Tensor forward(const tl::Tensor& ids) override {
    const int64_t s = ids.size(1);
    tl::Tensor x =
        tokens_->forward(ids) +
        positions_->forward(tl::arange(s, tl::TensorOptions(tl::kInt64).device(ids.device())));
    for (auto& b : blocks_) x = b->forward(x);
    return head_->forward(norm_->forward(x));
  }

 private:
  std::shared_ptr<nn::Embedding> tokens_, positions_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> head_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains a small Transformer language model on a counting task"};
  Config c;
  int64_t batch = 8, seq = 64, steps = 20;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::string device_name = "cpu";
  app.add_option("--batch-size", batch, "Sequences per step")->check(CLI::Range(1, 1 << 16));
  app.add_option("--seq-len", seq, "Tokens per sequence")->check(CLI::Range(2, 4096));
  app.add_option("--steps", steps, "Training steps")->check(CLI::Range(1, 1 << 20));
  app.add_option("--d-model", c.d_model, "Model width")->check(CLI::Range(8, 4096));
  app.add_option("--heads", c.heads, "Attention heads (dividing --d-model)")
      ->check(CLI::Range(1, 64));
  app.add_option("--layers", c.layers, "Transformer blocks")->check(CLI::Range(1, 64));
  app.add_option("--lr", lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", seed, "Seed of the initialisation and the data");
  CLI11_PARSE(app, argc, argv);
  if (c.d_model % c.heads != 0) {
    std::fprintf(stderr, "train_transformer: --d-model %lld is not a multiple of --heads %lld\n",
                 static_cast<long long>(c.d_model), static_cast<long long>(c.heads));
    return 2;
  }
  const tl::Device device(device_name);

  tl::manual_seed(seed);
  Transformer model(c);
  model.to(device);
  tl::optim::AdamW opt(model.parameters(), {lr, 0.9, 0.999, 1e-8, 1e-2});
  double first = 0, last = 0;
  for (int64_t step = 0; step < steps; ++step) {
    // Sequences that count up from a random start: the next token is the last plus one.
    tl::Tensor start = tl::randint(0, c.vocab, {batch, 1});
    tl::Tensor count = start + tl::arange(seq + 1, tl::TensorOptions(tl::kInt64));
    tl::Tensor wraps = count.to(tl::kFloat64).div(static_cast<double>(c.vocab)).to(tl::kInt64);
    tl::Tensor ids = (count - wraps * c.vocab).to(device);
    tl::Tensor input = ids.narrow(1, 0, seq), target = ids.narrow(1, 1, seq);
    opt.zero_grad();
    tl::Tensor logits = model.forward(input);
    tl::Tensor loss = nn::functional::cross_entropy(logits.reshape({batch * seq, c.vocab}),
                                                    target.reshape({batch * seq}));
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
  }
  std::printf("batch %lld, sequence %lld, %lld steps: loss %.4f -> %.4f\n",
              static_cast<long long>(batch), static_cast<long long>(seq),
              static_cast<long long>(steps), first, last);
  std::printf("peak allocated %.2f MiB, peak reserved %.2f MiB\n",
              tl::max_memory_allocated(device) / 1048576.0,
              tl::max_memory_reserved(device) / 1048576.0);
  return 0;
}
