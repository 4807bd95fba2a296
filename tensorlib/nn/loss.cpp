#include "tensorlib/nn/loss.h"

#include "tensorlib/autograd/function.h"

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
  TL_CHECK(target.dim() == 1 && target.size(0) == scores.size(0), op,
           ": expected target of shape [", scores.size(0), "], got ", target.sizes());
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
  Tensor smooth =
      (-logp.sum({1}) / static_cast<double>(logits.size(1)) * valid).sum() / valid.sum();
  return nll * (1 - label_smoothing) + smooth * label_smoothing;
}

}  // namespace tl::nn::functional

namespace tl::nn::functional {

namespace {
// softplus(-x) = -log sigmoid(x) = max(-x, 0) + log(1 + exp(-|x|)), finite for any finite x.
Tensor softplus_neg(const Tensor& x) {
  return (-x).relu() + ((-x.abs()).exp() + 1).log();
}
}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight) {
  TL_CHECK(input.sizes() == target.sizes(), "Target size (", target.sizes(),
           ") must be the same as input size (", input.sizes(), ")");
  TL_CHECK(input.is_floating_point() && target.is_floating_point(),
           "binary_cross_entropy_with_logits: expected floating point input and target, got ",
           input.dtype(), " and ", target.dtype());
  for (const Tensor* p : {&weight, &pos_weight}) {
    if (!p->defined()) continue;
    TL_CHECK(tl::broadcast_shapes(p->sizes(), input.sizes()) == input.sizes().vec(),
             "binary_cross_entropy_with_logits: ", p == &weight ? "weight" : "pos_weight",
             " of shape ", p->sizes(), " does not broadcast to the input's shape ", input.sizes());
  }
  const double n = static_cast<double>(input.numel());
  Tensor out = autograd::forward_no_grad([&] {
    Tensor sp = softplus_neg(input);
    if (pos_weight.defined()) sp.mul_((pos_weight - 1) * target + 1);
    Tensor loss = (1 - target) * input + sp;
    if (weight.defined()) loss = loss * weight;
    return loss.mean();
  });
  const bool rg[4] = {input.requires_grad(), target.requires_grad(),
                      weight.defined() && weight.requires_grad(),
                      pos_weight.defined() && pos_weight.requires_grad()};
  autograd::record(out, "BinaryCrossEntropyWithLogits", {&input, &target, &weight, &pos_weight},
                   {input, target, weight, pos_weight},
                   [rg, n](const autograd::variable_list& g, const autograd::variable_list& s) {
                     const Tensor &x = s[0], &t = s[1], &w = s[2], &pw = s[3];
                     // d loss_i / d x_i = w ((pw t + 1 - t) sigmoid(x) - pw t); with pw = 1, w
                     // (sigmoid(x) - t).
                     Tensor c = g[0] / n;
                     Tensor cw = w.defined() ? w * c : c;
                     autograd::variable_list grads(4);
                     if (rg[0]) {
                       Tensor d =
                           pw.defined() ? (pw * t + 1 - t) * x.sigmoid() - pw * t : x.sigmoid() - t;
                       grads[0] = d * cw;
                     }
                     Tensor sp = rg[1] || rg[2] || rg[3] ? softplus_neg(x) : Tensor();
                     if (rg[1]) grads[1] = (pw.defined() ? (pw - 1) * sp - x : -x) * cw;
                     if (rg[2]) {
                       Tensor loss = (1 - t) * x + (pw.defined() ? sp * ((pw - 1) * t + 1) : sp);
                       grads[2] = autograd::sum_to(loss * c, w.sizes());
                     }
                     if (rg[3]) grads[3] = autograd::sum_to(t * sp * cw, pw.sizes());
                     return grads;
                   });
  return out;
}

}  // namespace tl::nn::functional
