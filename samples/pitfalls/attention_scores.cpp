// Pitfall 11: attention written out holds B x H x S x S scores, several at once.
//
// scores = q @ k^T / sqrt(d), a causal mask, softmax: each step makes a new B x H x S x S
// tensor, and the one before it is still referenced while the next is computed, so the peak
// is a few times the score matrix -- and it grows with the square of the sequence. Here, at
// batch 2, 4 heads and 4,096 positions, one score matrix is 512 MiB in float32 while q, k and
// v are 1 MiB each. The fix computes the same softmax(q k^T) v a block of queries at a time
// (each row's softmax needs only its own row), so no more than one block's scores are ever
// live; in PyTorch, torch.nn.functional.scaled_dot_product_attention's flash and
// memory-efficient kernels do this in tiles.
#include <cmath>

#include "common.h"

namespace {

constexpr int64_t kBatch = 2, kHeads = 4, kSeq = 4096, kHeadDim = 8;
constexpr int64_t kQueryBlock = 256;  // the fix: queries per block

tl::Tensor causal_future(int64_t rows_from, int64_t rows, const tl::Device& device) {
  tl::Tensor cols = tl::arange(kSeq, tl::TensorOptions(tl::kInt64).device(device));
  tl::Tensor row_ids = tl::arange(rows, tl::TensorOptions(tl::kInt64).device(device)) + rows_from;
  return cols.view({1, kSeq}).gt(row_ids.view({rows, 1}));
}

// The leak: every intermediate is the full B x H x S x S.
tl::Tensor attention(const tl::Tensor& q, const tl::Tensor& k, const tl::Tensor& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  tl::Tensor scores = q.matmul(k.transpose(-2, -1)) * scale;
  tl::Tensor weights = scores.masked_fill(causal_future(0, kSeq, q.device()), -1e9).softmax(-1);
  return weights.matmul(v);
}

// The fix: the same result, kQueryBlock rows of the scores at a time.
tl::Tensor attention_in_query_blocks(const tl::Tensor& q, const tl::Tensor& k,
                                     const tl::Tensor& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  std::vector<tl::Tensor> outs;
  for (int64_t r = 0; r < kSeq; r += kQueryBlock) {
    tl::Tensor qb = q.narrow(2, r, kQueryBlock);
    tl::Tensor scores = qb.matmul(k.transpose(-2, -1)) * scale;
    tl::Tensor weights =
        scores.masked_fill(causal_future(r, kQueryBlock, q.device()), -1e9).softmax(-1);
    outs.push_back(weights.matmul(v));
  }
  return tl::cat(outs, 2);
}

}  // namespace

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_attention_scores",
      "causal attention over 4,096 positions with the scores written out (fixed: a block of "
      "queries at a time)",
      1);
  tl::manual_seed(0);
  pitfalls::Report report(o.device);
  report.take("before");
  double checksum = 0;
  {
    tl::NoGradGuard no_grad;  // inference: nothing is saved for a backward
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor q = tl::randn({kBatch, kHeads, kSeq, kHeadDim}, o.device);
      tl::Tensor k = tl::randn({kBatch, kHeads, kSeq, kHeadDim}, o.device);
      tl::Tensor v = tl::randn({kBatch, kHeads, kSeq, kHeadDim}, o.device);
      tl::Tensor y = o.fixed ? attention_in_query_blocks(q, k, v) : attention(q, k, v);
      checksum += y.abs().sum().item<double>();
    }
  }
  report.take("after");
  std::printf("sum of |output| over %d steps: %.6e (the same with --fixed)\n\n", o.steps, checksum);
  report.print();
  return 0;
}
