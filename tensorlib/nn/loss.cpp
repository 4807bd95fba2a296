#include "tensorlib/nn/loss.h"

namespace tl::nn::functional {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  TL_CHECK(input.sizes() == target.sizes(), "mse_loss: input ", input.sizes(), " and target ",
           target.sizes(), " must have the same shape");
  Tensor d = input - target;
  return (d * d).mean();
}

namespace {
void check_targets(const Tensor& scores, const Tensor& target, const char* op) {
  TL_CHECK(scores.dim() == 2, op, ": expected input of shape [N, C], got ", scores.sizes());
  TL_CHECK(target.dim() == 1 && target.size(0) == scores.size(0), op, ": expected target of shape [",
           scores.size(0), "], got ", target.sizes());
  TL_CHECK(target.dtype() == kInt64, op, ": expected target of dtype int64, got ", target.dtype());
}
}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  check_targets(log_probs, target, "nll_loss");
  Tensor valid = target != ignore_index;
  Tensor safe = tl::where(valid, target, tl::zeros_like(target));
  Tensor picked = -log_probs.gather(1, safe.unsqueeze(1)).squeeze(1);
  Tensor w = valid.to(log_probs.dtype());
  return (picked * w).sum() / w.sum();
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     double label_smoothing) {
  check_targets(logits, target, "cross_entropy");
  TL_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
           "cross_entropy: label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  Tensor logp = logits.log_softmax(1);
  Tensor nll = nll_loss(logp, target, ignore_index);
  if (label_smoothing == 0) return nll;
  // PyTorch: (1 - e) * nll + e * mean over valid rows of (-sum_c logp / C).
  Tensor valid = (target != ignore_index).to(logits.dtype());
  Tensor smooth = (-logp.sum({1}) / static_cast<double>(logits.size(1)) * valid).sum() / valid.sum();
  return nll * (1 - label_smoothing) + smooth * label_smoothing;
}

}  // namespace tl::nn::functional
