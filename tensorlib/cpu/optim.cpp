// The CPU's fused optimizer update (Note [Fused Adam] in optim/optimizer.cpp).
#include <cmath>
#include <cstdint>

#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {
namespace {

// The composed update's arithmetic, operation for operation and in its order and types (each
// scalar rounded to M as the op it stands for rounds it), so that the fused pass gives the same
// bits: IEEE addition, multiplication, division and square root are exactly rounded, whatever
// the vector width, and this file is compiled without contraction into FMAs.
template <typename M>
struct AdamScalars {
  M beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2, eps, step_size, wd, decay;
  explicit AdamScalars(const detail::AdamStep& s)
      : beta1(static_cast<M>(s.beta1)),
        one_minus_beta1(static_cast<M>(1 - s.beta1)),
        beta2(static_cast<M>(s.beta2)),
        one_minus_beta2(static_cast<M>(1 - s.beta2)),
        bias_correction2(static_cast<M>(s.bias_correction2)),
        eps(static_cast<M>(s.eps)),
        step_size(static_cast<M>(s.step_size)),
        wd(static_cast<M>(s.weight_decay)),
        decay(static_cast<M>(1 - s.lr * s.weight_decay)) {}
};

// One element range; `Decay`: 0 none, 1 Adam's (into the gradient), 2 AdamW's (into p).
template <typename M, int Decay>
void adam_range(M* __restrict p, const M* __restrict g, M* __restrict m, M* __restrict v, int64_t n,
                const AdamScalars<M>& k) {
  for (int64_t i = 0; i < n; ++i) {
    M gi = g[i];
    M pi = p[i];
    if constexpr (Decay == 1) gi = gi + pi * k.wd;                // g + p * wd
    if constexpr (Decay == 2) pi = pi * k.decay;                  // p.mul_(1 - lr * wd)
    const M mi = m[i] * k.beta1 + k.one_minus_beta1 * gi;         // m.mul_(b1).add_(g, 1 - b1)
    const M vi = v[i] * k.beta2 + k.one_minus_beta2 * (gi * gi);  // v.mul_(b2).add_(g * g, 1 - b2)
    const M denom = std::sqrt(vi) / k.bias_correction2 + k.eps;   // (v.sqrt() / bc2).add_(eps)
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - k.step_size * (mi / denom);  // p.sub_(m / denom, lr / bc1)
  }
}

template <typename M>
void adam_all(const detail::AdamStep& step, const Tensor& p, const Tensor& g, const Tensor& m,
              const Tensor& v) {
  const AdamScalars<M> k(step);
  M* pp = p.data_ptr<M>();
  const M* gp = g.data_ptr<M>();
  M* mp = m.data_ptr<M>();
  M* vp = v.data_ptr<M>();
  const int decay = step.weight_decay == 0 ? 0 : step.decoupled ? 2 : 1;
  parallel_for(p.numel(), [&](int64_t b, int64_t e) {
    if (decay == 0)
      adam_range<M, 0>(pp + b, gp + b, mp + b, vp + b, e - b, k);
    else if (decay == 1)
      adam_range<M, 1>(pp + b, gp + b, mp + b, vp + b, e - b, k);
    else
      adam_range<M, 2>(pp + b, gp + b, mp + b, vp + b, e - b, k);
  });
}

}  // namespace

bool Kernels::adam_step(const detail::AdamStep& step, const Tensor& p, const Tensor& g,
                        const Tensor& m, const Tensor& v) const {
  const ScalarType t = p.dtype();
  for (const Tensor* x : {&g, &m, &v})
    if (x->dtype() != t || x->sizes() != p.sizes() || !x->is_contiguous()) return false;
  if (!p.is_contiguous()) return false;
  // Four distinct buffers (the composed ops would see a write to one through another).
  const auto bytes = static_cast<uintptr_t>(p.numel()) * element_size(t);
  auto start = [](const Tensor& x) { return reinterpret_cast<uintptr_t>(x.data_ptr()); };
  const Tensor* all[] = {&p, &g, &m, &v};
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      if (start(*all[i]) < start(*all[j]) + bytes && start(*all[j]) < start(*all[i]) + bytes)
        return false;
  if (t == kFloat32)
    adam_all<float>(step, p, g, m, v);
  else if (t == kFloat64)
    adam_all<double>(step, p, g, m, v);
  else
    return false;  // half, bfloat16: computed in float by the composed ops
  return true;
}

}  // namespace tl::cpu
