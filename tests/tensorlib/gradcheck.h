// Shared by the tensorlib tests: autograd's gradients against central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <tensorlib/autograd/engine.h>
#include <tensorlib/autograd/grad_mode.h>
#include <tensorlib/tensorlib.h>

namespace tl_test {

using tl::Tensor;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double at(const Tensor& t, int64_t i) {
  return t.contiguous().view({-1}).select(0, i).item<double>();
}

// Compares autograd's gradient of sum(f(inputs) * w) (w fixed random weights) with central
// differences. Inputs are float64 leaves.
inline void gradcheck(const std::string& name, const Fn& f, std::vector<Tensor> inputs,
                      double eps = 1e-6, double tol = 1e-5) {
  for (auto& x : inputs) x.requires_grad_();
  Tensor out = f(inputs);
  tl::manual_seed(99);
  Tensor w = tl::rand(out.sizes(), tl::kFloat64) + 0.5;
  auto weighted = [&](const std::vector<Tensor>& in) {
    tl::NoGradGuard no_grad;
    return (f(in) * w).sum().item<double>();
  };
  std::vector<Tensor> grads = tl::autograd::grad({(out * w).sum()}, inputs);
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(grads[k].defined()) << name << ": no gradient for input " << k;
    ASSERT_EQ(grads[k].sizes(), inputs[k].sizes()) << name << " input " << k;
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      std::vector<Tensor> plus, minus;
      for (size_t j = 0; j < inputs.size(); ++j) {
        plus.push_back(inputs[j].detach().clone());
        minus.push_back(inputs[j].detach().clone());
      }
      plus[k].view({-1}).select(0, i).add_(eps);
      minus[k].view({-1}).select(0, i).sub_(eps);
      double numeric = (weighted(plus) - weighted(minus)) / (2 * eps);
      double analytic = at(grads[k], i);
      ASSERT_NEAR(analytic, numeric, tol * std::max(1.0, std::fabs(numeric)))
          << name << ": input " << k << " element " << i;
    }
  }
}

inline Tensor randd(tl::IntArrayRef sizes, double lo = -1, double hi = 1) {
  return tl::rand(sizes, tl::kFloat64) * (hi - lo) + lo;
}

}  // namespace tl_test
