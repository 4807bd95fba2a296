// The CPU loops of the elementwise ops (their front-ends: ops/elementwise.cpp). Operands
// arrive in the compute dtype and broadcast to out's shape; every stride works.
#include "tensorlib/core/elementwise_math.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {

namespace {

using math::BinaryOp;
using math::UnaryOp;

// The type arithmetic runs in: bool computes as int.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, bool>, int, opmath_t<T>>;

template <typename T>
void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                const Scalar& alpha) {
  using M = compute_t<T>;
  const M al = alpha.to<M>();
  switch (op) {
    case BinaryOp::add:
      if (al == M(1)) {
        binary_kernel<T, T, T>(out, a, b, [](T x, T y) {
          return convert<T>(math::binary<BinaryOp::add>(M(x), M(y), M(1)));
        });
        return;
      }
      binary_kernel<T, T, T>(out, a, b, [al](T x, T y) {
        return convert<T>(math::binary<BinaryOp::add>(M(x), M(y), al));
      });
      return;
#define TL_ARITHMETIC(NAME)                                            \
  case BinaryOp::NAME:                                                 \
    binary_kernel<T, T, T>(out, a, b, [al](T x, T y) {                 \
      return convert<T>(math::binary<BinaryOp::NAME>(M(x), M(y), al)); \
    });                                                                \
    return;
      TL_ARITHMETIC(sub)
      TL_ARITHMETIC(mul)
      TL_ARITHMETIC(div)
      TL_ARITHMETIC(pow)
      TL_ARITHMETIC(gelu_backward)
      TL_ARITHMETIC(relu_backward)
#undef TL_ARITHMETIC
#define TL_COMPARE(NAME)                                                                           \
  case BinaryOp::NAME:                                                                             \
    binary_kernel<bool, T, T>(out, a, b,                                                           \
                              [](T x, T y) { return math::compare<BinaryOp::NAME>(M(x), M(y)); }); \
    return;
      TL_COMPARE(eq)
      TL_COMPARE(ne)
      TL_COMPARE(lt)
      TL_COMPARE(le)
      TL_COMPARE(gt)
      TL_COMPARE(ge)
#undef TL_COMPARE
  }
}

template <UnaryOp Op>
void run_unary(const Tensor& out, const Tensor& in) {
  if constexpr (math::keeps_dtype(Op)) {
    TL_DISPATCH_ALL(out.dtype(), math::name(Op), [&]<typename T>() {
      unary_kernel<T, T>(out, in, [](T x) { return convert<T>(math::unary<Op>(compute_t<T>(x))); });
    });
  } else {
    TL_DISPATCH_FLOATING(out.dtype(), math::name(Op), [&]<typename T>() {
      unary_kernel<T, T>(out, in, [](T x) { return convert<T>(math::unary<Op>(opmath_t<T>(x))); });
    });
  }
}

}  // namespace

void Kernels::unary(UnaryOp op, const Tensor& out, const Tensor& in) const {
  switch (op) {
#define TL_UNARY(NAME) \
  case UnaryOp::NAME:  \
    return run_unary<UnaryOp::NAME>(out, in);
    TL_UNARY(neg)
    TL_UNARY(abs)
    TL_UNARY(relu)
    TL_UNARY(exp)
    TL_UNARY(log)
    TL_UNARY(sqrt)
    TL_UNARY(rsqrt)
    TL_UNARY(sin)
    TL_UNARY(cos)
    TL_UNARY(tanh)
    TL_UNARY(sigmoid)
    TL_UNARY(gelu)
    TL_UNARY(reciprocal)
#undef TL_UNARY
  }
}

void Kernels::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                     const Scalar& alpha) const {
  TL_DISPATCH_ALL(a.dtype(), math::name(op),
                  [&]<typename T>() { run_binary<T>(op, out, a, b, alpha); });
}

void Kernels::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) const {
  TL_DISPATCH_ALL(out.dtype(), "where", [&]<typename T>() {
    ternary_kernel<T, bool, T, T>(out, cond, a, b, [](bool k, T u, T v) { return k ? u : v; });
  });
}

void Kernels::clamp(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                    const std::optional<Scalar>& hi) const {
  TL_DISPATCH_ALL(out.dtype(), "clamp", [&]<typename T>() {
    using M = compute_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const M l = has_lo ? lo->to<M>() : M(0), h = has_hi ? hi->to<M>() : M(0);
    unary_kernel<T, T>(out, in,
                       [=](T x) { return convert<T>(math::clamp(M(x), has_lo, l, has_hi, h)); });
  });
}

void Kernels::masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) const {
  TL_DISPATCH_ALL(self.dtype(), "masked_fill_", [&]<typename T>() {
    const T v = value.to<T>();
    binary_kernel<T, T, bool>(self, self, mask, [v](T x, bool k) { return k ? v : x; });
  });
}

}  // namespace tl::cpu
