// The front-ends of the elementwise ops: broadcasting, PyTorch's type promotion, autograd
// recording and the in-place rules (forms that bump the version counter). The loops are each
// backend's (Note [Device dispatch]; the CPU's in cpu/elementwise.cpp).
#include <cmath>

#include "tensorlib/autograd/function.h"
#include "tensorlib/core/elementwise_math.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {

using autograd::record;
using autograd::sum_to;
using autograd::variable_list;

namespace {
template <typename F>
Tensor forward(F f) {
  return autograd::forward_no_grad(f);
}

// In-place with autograd (Note [In-place and autograd]): the new value is computed out of
// place, recording the graph from self's current history, then written into self, whose
// history moves to the new node.
// The op runs on a clone of self, so what its node saves is not the tensor being overwritten
// (PyTorch saves exactly what each in-place formula needs; this costs one copy more).
template <typename F>
Tensor& inplace_with_grad(Tensor& self, const char* op, F out_of_place) {
  autograd::check_inplace(self, op);
  Tensor r = out_of_place(self.clone());
  {
    NoGradGuard no_grad;
    self.copy_(r);
  }
  if (r.requires_grad()) autograd::set_history(self, r.grad_fn(), r.output_nr());
  if (self.is_view()) autograd::rebase_view_base(self, r);
  return self;
}
}  // namespace

// Note [In-place and autograd]
// PyTorch rewrites an in-place op's history on the tensor itself (and, for a view, on its
// base through CopySlices). tensorlib does the former; an in-place op on a view of a tensor
// that requires grad does not yet update the base's history.

// ---- Broadcasting and type promotion ------------------------------------------------------

std::vector<int64_t> broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TL_CHECK(da == db || da == 1 || db == 1, "cannot broadcast ", a, " with ", b,
             ": the size of tensor a (", da, ") must match the size of tensor b (", db,
             ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<Tensor> broadcast_tensors(TensorList tensors) {
  std::vector<int64_t> shape;
  for (const Tensor& t : tensors) shape = broadcast_shapes(shape, t.sizes());
  std::vector<Tensor> out;
  for (const Tensor& t : tensors)
    out.push_back(t.sizes() == IntArrayRef(shape) ? t : t.expand(shape));
  return out;
}

namespace {

// An operand of an elementwise op: a tensor, or a number wrapped in a 0-dim tensor (which
// takes part in type promotion by category only, see result_type_of).
struct Operand {
  Tensor t;
  bool wrapped = false;
};

Operand wrap(const Scalar& s) {
  Tensor t = detail::make_tensor({}, s.type(), Device(kCPU), "scalar_tensor");
  TL_DISPATCH_ALL(t.dtype(), "wrap", [&]<typename T>() { *t.data_ptr<T>() = s.to<T>(); });
  return {t, true};
}

// PyTorch's result type: dimensioned tensors outrank zero-dim tensors, which outrank wrapped
// numbers, except that a higher category (bool < integral < floating) always wins.
ScalarType combine_categories(std::optional<ScalarType> higher, std::optional<ScalarType> lower) {
  if (!higher) return lower.value_or(kFloat32);
  if (is_floating_point(*higher)) return *higher;
  if (lower && (*higher == kBool || is_floating_point(*lower)))
    return promote_types(*higher, *lower);
  return *higher;
}

ScalarType result_type_of(std::initializer_list<const Operand*> ops) {
  std::optional<ScalarType> dim, zero, wrapped;
  auto update = [](std::optional<ScalarType>& slot, ScalarType t) {
    slot = slot ? promote_types(*slot, t) : t;
  };
  for (const Operand* o : ops) {
    if (o->wrapped) {
      ScalarType t = o->t.dtype();
      update(wrapped, is_floating_point(t) ? get_default_dtype() : t);
    } else if (o->t.dim() == 0) {
      update(zero, o->t.dtype());
    } else {
      update(dim, o->t.dtype());
    }
  }
  std::optional<ScalarType> lower =
      zero || wrapped ? std::optional<ScalarType>(combine_categories(zero, wrapped)) : std::nullopt;
  return combine_categories(dim, lower);
}

// PyTorch's canCast: no float -> integer and no number -> bool for in-place results.
bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

void check_inplace_cast(ScalarType result, const Tensor& self) {
  TL_CHECK(can_cast(result, self.dtype()), "result type ", result,
           " can't be cast to the desired output type ", self.dtype());
}

Tensor as_dtype(const Tensor& t, ScalarType dt) {
  return t.dtype() == dt ? t : t.to(dt);
}

// t broadcast to `shape`, except that a 0-dim CPU operand of an op on another device stays as
// it is: the backend passes it by value (Note [Device dispatch]).
Tensor broadcast_on(const Tensor& t, IntArrayRef shape, Device device) {
  if (!device.is_cpu() && t.is_cpu()) return t;
  return t.sizes() == shape ? t : t.expand(shape);
}

using math::BinaryOp;
using math::is_comparison;
using math::UnaryOp;

// Runs op into `out` on `device` (operands already in the common dtype and broadcast).
void run_binary_on(Device device, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   const Scalar& alpha) {
  detail::kernels_for(device).binary(op, out, a, b, alpha);
}

// The one path every binary op takes. With `self` set, the op is in place on it.
Tensor binary(BinaryOp op, const Operand& a, const Operand& b, const Scalar& alpha = 1,
              Tensor* self = nullptr) {
  const char* name = math::name(op);
  const Device device = detail::check_device(name, {&a.t, &b.t}, /*allow_cpu_scalars=*/true);
  ScalarType common = result_type_of({&a, &b});
  if (op == BinaryOp::sub) {
    TL_CHECK(common != kBool,
             "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
             "or `logical_xor()` operator instead.");
  }
  if (op == BinaryOp::div && !is_floating_point(common)) common = get_default_dtype();
  TL_CHECK(!alpha.is_floating_point() || is_floating_point(common),
           "For integral input tensors, argument alpha must not be a floating point number.");
  auto shape = broadcast_shapes(a.t.sizes(), b.t.sizes());
  ScalarType out_dtype = is_comparison(op) ? kBool : common;
  Tensor ta = broadcast_on(as_dtype(a.t, common), shape, device);
  Tensor tb = broadcast_on(as_dtype(b.t, common), shape, device);

  if (self) {
    TL_CHECK(self->sizes() == IntArrayRef(shape), "output with shape ", self->sizes(),
             " doesn't match the broadcast shape ", IntArrayRef(shape));
    check_inplace_cast(out_dtype, *self);
    detail::check_no_internal_overlap(name, *self);
    if (self->dtype() == out_dtype) {
      run_binary_on(device, op, *self, ta, tb, alpha);
    } else {
      Tensor tmp = detail::make_tensor(shape, out_dtype, device, name);
      run_binary_on(device, op, tmp, ta, tb, alpha);
      detail::copy(*self, tmp);  // one bump for the op (Note [Version counter])
    }
    self->bump_version();
    return *self;
  }
  Tensor out = detail::make_tensor(shape, out_dtype, device, name);
  run_binary_on(device, op, out, ta, tb, alpha);
  return out;
}

Operand tensor_op(const Tensor& t) {
  return {t, false};
}

// Unary math that always produces a floating result (integers go to the default dtype).
template <UnaryOp Op>
Tensor unary_float(const char* name, const Tensor& t, Tensor* self = nullptr) {
  const Device device = detail::check_device(name, {&t});
  ScalarType dt = is_floating_point(t.dtype()) ? t.dtype() : get_default_dtype();
  if (self) {
    check_inplace_cast(dt, *self);
    detail::check_no_internal_overlap(name, *self);
  }
  Tensor in = as_dtype(t, dt);
  Tensor out = self ? *self : detail::make_tensor(t.sizes(), dt, device, name);
  detail::kernels_for(device).unary(Op, out, in);
  if (self) self->bump_version();
  return out;
}

// Unary math that keeps the dtype (neg, abs, relu).
template <UnaryOp Op>
Tensor unary_same(const char* name, const Tensor& t, Tensor* self = nullptr) {
  const Device device = detail::check_device(name, {&t});
  if (self) detail::check_no_internal_overlap(name, *self);
  Tensor out = self ? *self : detail::make_tensor(t.sizes(), t.dtype(), device, name);
  detail::kernels_for(device).unary(Op, out, t);
  if (self) self->bump_version();
  return out;
}

void check_neg(const Tensor& t) {
  TL_CHECK(t.dtype() != kBool,
           "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
           "invert a mask, use the `~` or `logical_not()` operator instead.");
}

}  // namespace

ScalarType result_type(const Tensor& a, const Tensor& b) {
  Operand x{a}, y{b};
  return result_type_of({&x, &y});
}
ScalarType result_type(const Tensor& a, const Scalar& b) {
  Operand x{a}, y = wrap(b);
  return result_type_of({&x, &y});
}

// ---- Arithmetic and comparison ------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = forward([&] { return binary(BinaryOp::add, tensor_op(a), tensor_op(b), alpha); });
  record(out, "Add", {&a, &b}, {},
         [as = a.sizes().vec(), bs = b.sizes().vec(), alpha](const variable_list& g,
                                                             const variable_list&) {
           return variable_list{sum_to(g[0], as), sum_to(g[0] * alpha, bs)};
         });
  return out;
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor out = forward([&] { return binary(BinaryOp::add, tensor_op(a), wrap(b), alpha); });
  record(out, "Add", {&a}, {},
         [](const variable_list& g, const variable_list&) { return variable_list{g[0]}; });
  return out;
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = forward([&] { return binary(BinaryOp::sub, tensor_op(a), tensor_op(b), alpha); });
  record(out, "Sub", {&a, &b}, {},
         [as = a.sizes().vec(), bs = b.sizes().vec(), alpha](const variable_list& g,
                                                             const variable_list&) {
           return variable_list{sum_to(g[0], as), sum_to(g[0] * (-alpha.to_double()), bs)};
         });
  return out;
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor out = forward([&] { return binary(BinaryOp::sub, tensor_op(a), wrap(b), alpha); });
  record(out, "Sub", {&a}, {},
         [](const variable_list& g, const variable_list&) { return variable_list{g[0]}; });
  return out;
}
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::mul, tensor_op(a), tensor_op(b)); });
  record(out, "Mul", {&a, &b}, {a, b}, [](const variable_list& g, const variable_list& s) {
    return variable_list{sum_to(g[0] * s[1], s[0].sizes()), sum_to(g[0] * s[0], s[1].sizes())};
  });
  return out;
}
Tensor mul(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return binary(BinaryOp::mul, tensor_op(a), wrap(b)); });
  record(out, "Mul", {&a}, {},
         [b](const variable_list& g, const variable_list&) { return variable_list{g[0] * b}; });
  return out;
}
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::div, tensor_op(a), tensor_op(b)); });
  record(out, "Div", {&a, &b}, {a, b}, [](const variable_list& g, const variable_list& s) {
    return variable_list{sum_to(g[0] / s[1], s[0].sizes()),
                         sum_to(-g[0] * s[0] / (s[1] * s[1]), s[1].sizes())};
  });
  return out;
}
Tensor div(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return binary(BinaryOp::div, tensor_op(a), wrap(b)); });
  record(out, "Div", {&a}, {},
         [b](const variable_list& g, const variable_list&) { return variable_list{g[0] / b}; });
  return out;
}
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::pow, tensor_op(a), tensor_op(b)); });
  record(out, "Pow", {&a, &b}, {a, b, out}, [](const variable_list& g, const variable_list& s) {
    Tensor ga = g[0] * s[1] * s[0].pow(s[1] - 1);
    Tensor gb = g[0] * s[2] * s[0].log();
    return variable_list{sum_to(ga, s[0].sizes()), sum_to(gb, s[1].sizes())};
  });
  return out;
}
Tensor pow(const Tensor& a, const Scalar& b) {
  TL_CHECK(!(is_integral(a.dtype(), true) && b.is_integral() && b.to_long() < 0),
           "Integers to negative integer powers are not allowed.");
  Tensor out = forward([&] { return binary(BinaryOp::pow, tensor_op(a), wrap(b)); });
  record(out, "Pow", {&a}, {a}, [b](const variable_list& g, const variable_list& s) {
    double e = b.to_double();
    if (e == 0) return variable_list{tl::zeros_like(g[0])};
    return variable_list{g[0] * e * s[0].pow(e - 1)};
  });
  return out;
}
Tensor pow(const Scalar& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::pow, wrap(a), tensor_op(b)); });
  record(out, "Pow", {&b}, {out}, [a](const variable_list& g, const variable_list& s) {
    return variable_list{g[0] * s[0] * std::log(a.to_double())};
  });
  return out;
}
Tensor eq(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::eq, tensor_op(a), tensor_op(b));
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::ne, tensor_op(a), tensor_op(b));
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::lt, tensor_op(a), tensor_op(b));
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::le, tensor_op(a), tensor_op(b));
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::gt, tensor_op(a), tensor_op(b));
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::ge, tensor_op(a), tensor_op(b));
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const {
  return tl::add(*this, o, alpha);
}
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const {
  return tl::add(*this, o, alpha);
}
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const {
  return tl::sub(*this, o, alpha);
}
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const {
  return tl::sub(*this, o, alpha);
}
Tensor Tensor::mul(const Tensor& o) const {
  return tl::mul(*this, o);
}
Tensor Tensor::mul(const Scalar& o) const {
  return tl::mul(*this, o);
}
Tensor Tensor::div(const Tensor& o) const {
  return tl::div(*this, o);
}
Tensor Tensor::div(const Scalar& o) const {
  return tl::div(*this, o);
}
Tensor Tensor::pow(const Tensor& e) const {
  return tl::pow(*this, e);
}
Tensor Tensor::pow(const Scalar& e) const {
  return tl::pow(*this, e);
}

namespace {
// An in-place binary op: through autograd when self or the other tensor needs grad (Note
// [In-place and autograd]), else the op written into self (its operand made only then).
template <typename MakeOperand, typename OutOfPlace>
Tensor& binary_in_place(Tensor& self, const Tensor* other, BinaryOp op, const Scalar& alpha,
                        MakeOperand operand, OutOfPlace out_of_place) {
  if (other != nullptr ? autograd::needs_grad({&self, other}) : autograd::needs_grad({&self})) {
    const std::string name = std::string(math::name(op)) + "_";
    return inplace_with_grad(self, name.c_str(), out_of_place);
  }
  binary(op, tensor_op(self), operand(), alpha, &self);
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) {
  return binary_in_place(
      *this, &o, BinaryOp::add, alpha, [&] { return tensor_op(o); },
      [&](const Tensor& s) { return tl::add(s, o, alpha); });
}
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) {
  return binary_in_place(
      *this, nullptr, BinaryOp::add, alpha, [&] { return wrap(o); },
      [&](const Tensor& s) { return tl::add(s, o, alpha); });
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) {
  return binary_in_place(
      *this, &o, BinaryOp::sub, alpha, [&] { return tensor_op(o); },
      [&](const Tensor& s) { return tl::sub(s, o, alpha); });
}
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) {
  return binary_in_place(
      *this, nullptr, BinaryOp::sub, alpha, [&] { return wrap(o); },
      [&](const Tensor& s) { return tl::sub(s, o, alpha); });
}
Tensor& Tensor::mul_(const Tensor& o) {
  return binary_in_place(
      *this, &o, BinaryOp::mul, 1, [&] { return tensor_op(o); },
      [&](const Tensor& s) { return tl::mul(s, o); });
}
Tensor& Tensor::mul_(const Scalar& o) {
  return binary_in_place(
      *this, nullptr, BinaryOp::mul, 1, [&] { return wrap(o); },
      [&](const Tensor& s) { return tl::mul(s, o); });
}
Tensor& Tensor::div_(const Tensor& o) {
  return binary_in_place(
      *this, &o, BinaryOp::div, 1, [&] { return tensor_op(o); },
      [&](const Tensor& s) { return tl::div(s, o); });
}
Tensor& Tensor::div_(const Scalar& o) {
  return binary_in_place(
      *this, nullptr, BinaryOp::div, 1, [&] { return wrap(o); },
      [&](const Tensor& s) { return tl::div(s, o); });
}
Tensor& Tensor::pow_(const Tensor& e) {
  return binary_in_place(
      *this, &e, BinaryOp::pow, 1, [&] { return tensor_op(e); },
      [&](const Tensor& s) { return tl::pow(s, e); });
}
Tensor& Tensor::pow_(const Scalar& e) {
  return binary_in_place(
      *this, nullptr, BinaryOp::pow, 1, [&] { return wrap(e); },
      [&](const Tensor& s) { return tl::pow(s, e); });
}

#define TL_DEFINE_COMPARE(NAME)                               \
  Tensor Tensor::NAME(const Tensor& o) const {                \
    return tl::NAME(*this, o);                                \
  }                                                           \
  Tensor Tensor::NAME(const Scalar& o) const {                \
    return binary(BinaryOp::NAME, tensor_op(*this), wrap(o)); \
  }
TL_DEFINE_COMPARE(eq)
TL_DEFINE_COMPARE(ne)
TL_DEFINE_COMPARE(lt)
TL_DEFINE_COMPARE(le)
TL_DEFINE_COMPARE(gt)
TL_DEFINE_COMPARE(ge)
#undef TL_DEFINE_COMPARE

// ---- where, clamp, masked_fill ------------------------------------------------------------

namespace {
Tensor where_impl(const Tensor& cond, const Operand& a, const Operand& b) {
  const Device device = detail::check_device("where", {&cond, &a.t, &b.t}, true);
  TL_CHECK(cond.dtype() == kBool,
           "where expected condition to be a boolean tensor, but got a "
           "tensor with dtype ",
           cond.dtype());
  ScalarType common = result_type_of({&a, &b});
  auto shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.t.sizes()), b.t.sizes());
  Tensor c = broadcast_on(cond, shape, device),
         x = broadcast_on(as_dtype(a.t, common), shape, device),
         y = broadcast_on(as_dtype(b.t, common), shape, device);
  Tensor out = detail::make_tensor(shape, common, device, "where");
  detail::kernels_for(device).where(out, c, x, y);
  return out;
}
}  // namespace

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return where_impl(c, tensor_op(a), tensor_op(b)); });
  record(
      out, "Where", {&a, &b}, {c},
      [as = a.sizes().vec(), bs = b.sizes().vec()](const variable_list& g, const variable_list& s) {
        return variable_list{sum_to(tl::where(s[0], g[0], 0), as),
                             sum_to(tl::where(s[0], 0, g[0]), bs)};
      });
  return out;
}
Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) {
  Tensor out = forward([&] { return where_impl(c, wrap(a), tensor_op(b)); });
  record(out, "Where", {&b}, {c},
         [bs = b.sizes().vec()](const variable_list& g, const variable_list& s) {
           return variable_list{sum_to(tl::where(s[0], 0, g[0]), bs)};
         });
  return out;
}
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return where_impl(c, tensor_op(a), wrap(b)); });
  record(out, "Where", {&a}, {c},
         [as = a.sizes().vec()](const variable_list& g, const variable_list& s) {
           return variable_list{sum_to(tl::where(s[0], g[0], 0), as)};
         });
  return out;
}

namespace {
Tensor clamp_impl(const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi,
                  Tensor* self) {
  const Device device = detail::check_device("clamp", {&t});
  TL_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  Operand a{t};
  std::optional<Operand> wl, wh;
  ScalarType dt = t.dtype();
  if (lo) {
    wl = wrap(*lo);
    Operand x = *wl;
    dt = result_type_of({&a, &x});
  }
  if (hi) {
    wh = wrap(*hi);
    Operand x = *wh;
    dt = lo ? result_type_of({&a, &*wl, &x}) : result_type_of({&a, &x});
  }
  if (self) {
    check_inplace_cast(dt, *self);
    detail::check_no_internal_overlap("clamp_", *self);
  }
  Tensor in = as_dtype(t, dt);
  Tensor out = self ? *self : detail::make_tensor(t.sizes(), dt, device, "clamp");
  detail::kernels_for(device).clamp(out, in, lo, hi);
  if (self) self->bump_version();
  return out;
}
}  // namespace

Tensor clamp(const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  Tensor out = forward([&] { return clamp_impl(t, lo, hi, nullptr); });
  record(out, "Clamp", {&t}, {t}, [lo, hi](const variable_list& g, const variable_list& s) {
    // The gradient passes where the input was inside [min, max] (bounds included).
    Tensor pass = tl::ones_like(s[0], kBool);
    if (lo) pass = tl::where(s[0] >= *lo, pass, false);
    if (hi) pass = tl::where(s[0] <= *hi, pass, false);
    return variable_list{tl::where(pass, g[0], 0)};
  });
  return out;
}
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return tl::clamp(*this, lo, hi);
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  if (autograd::needs_grad({this}))
    return inplace_with_grad(*this, "clamp_",
                             [&](const Tensor& s) { return tl::clamp(s, lo, hi); });
  clamp_impl(*this, lo, hi, this);
  return *this;
}

namespace {
// masked_fill_ without autograd and without bumping the version (Note [Version counter]).
void masked_fill_into(const Tensor& self, const Tensor& mask, const Scalar& value) {
  const Device device = detail::check_device("masked_fill_", {&self, &mask});
  TL_CHECK(mask.dtype() == kBool,
           "masked_fill_ only supports boolean masks, but got mask with "
           "dtype ",
           mask.dtype());
  TL_CHECK(broadcast_shapes(self.sizes(), mask.sizes()) == self.sizes().vec(),
           "masked_fill_: mask of shape ", mask.sizes(),
           " cannot be broadcast to the tensor's "
           "shape ",
           self.sizes());
  detail::check_no_internal_overlap("masked_fill_", self);
  detail::kernels_for(device).masked_fill(self, mask.expand(self.sizes()), value);
}
}  // namespace

Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) {
  if (autograd::needs_grad({this}))
    return inplace_with_grad(*this, "masked_fill_",
                             [&](const Tensor& s) { return s.masked_fill(mask, value); });
  masked_fill_into(*this, mask, value);
  bump_version();
  return *this;
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  Tensor out = forward([&] {
    Tensor o = clone();
    masked_fill_into(o, mask, value);
    return o;
  });
  record(out, "MaskedFill", {this}, {mask}, [](const variable_list& g, const variable_list& s) {
    return variable_list{g[0].masked_fill(s[0], 0)};
  });
  return out;
}
Tensor masked_fill(const Tensor& t, const Tensor& mask, const Scalar& value) {
  return t.masked_fill(mask, value);
}

// ---- Unary --------------------------------------------------------------------------------

Tensor Tensor::neg() const {
  check_neg(*this);
  Tensor out = forward([&] { return unary_same<UnaryOp::neg>("neg", *this); });
  record(out, "Neg", {this}, {},
         [](const variable_list& g, const variable_list&) { return variable_list{-g[0]}; });
  return out;
}
Tensor Tensor::abs() const {
  Tensor out = forward([&] { return unary_same<UnaryOp::abs>("abs", *this); });
  record(out, "Abs", {this}, {*this}, [](const variable_list& g, const variable_list& s) {
    Tensor sign = (s[0] > 0).to(g[0].dtype()) - (s[0] < 0).to(g[0].dtype());
    return variable_list{g[0] * sign};
  });
  return out;
}
Tensor Tensor::relu() const {
  Tensor out = forward([&] { return unary_same<UnaryOp::relu>("relu", *this); });
  record(out, "Relu", {this}, {out}, [](const variable_list& g, const variable_list& s) {
    // One pass (PyTorch's threshold_backward); composed from differentiable ops when the
    // backward itself is recorded (create_graph).
    if (autograd::is_grad_enabled()) return variable_list{tl::where(s[0] > 0, g[0], 0)};
    const Tensor gy = g[0].to(s[0].dtype());
    const Device device = detail::check_device("relu_backward", {&gy, &s[0]});
    Tensor gx = detail::make_tensor(s[0].sizes(), s[0].dtype(), device, "threshold_backward");
    run_binary_on(device, BinaryOp::relu_backward, gx, gy, s[0], 1);
    return variable_list{gx};
  });
  return out;
}
Tensor& Tensor::neg_() {
  check_neg(*this);
  if (autograd::needs_grad({this}))
    return inplace_with_grad(*this, "neg_", [&](const Tensor& s) { return s.neg(); });
  unary_same<UnaryOp::neg>("neg_", *this, this);
  return *this;
}
Tensor& Tensor::abs_() {
  if (autograd::needs_grad({this}))
    return inplace_with_grad(*this, "abs_", [&](const Tensor& s) { return s.abs(); });
  unary_same<UnaryOp::abs>("abs_", *this, this);
  return *this;
}
Tensor& Tensor::relu_() {
  if (autograd::needs_grad({this}))
    return inplace_with_grad(*this, "relu_", [&](const Tensor& s) { return s.relu(); });
  unary_same<UnaryOp::relu>("relu_", *this, this);
  return *this;
}

namespace {
// d/dx of each float unary op, from the input x, the output y and the output gradient g.
Tensor unary_derivative(const char* name, const Tensor& g, const Tensor& x, const Tensor& y) {
  std::string_view n(name);
  if (n == "exp") return g * y;
  if (n == "log") return g / x;
  if (n == "sqrt") return g / (y * 2);
  if (n == "rsqrt") return g * y.pow(3) * -0.5;
  if (n == "sin") return g * x.cos();
  if (n == "cos") return -(g * x.sin());
  if (n == "tanh") return g * (1 - y * y);
  if (n == "sigmoid") return g * y * (1 - y);
  if (n == "reciprocal") return -(g * y * y);
  if (n == "gelu") {
    // d/dx x*Phi(x) = Phi(x) + x*phi(x); one fused kernel (not itself differentiable).
    Tensor gx = g.to(x.dtype());
    const Device device = detail::check_device("gelu_backward", {&gx, &x});
    Tensor out = detail::make_tensor(x.sizes(), x.dtype(), device, "gelu_backward");
    run_binary_on(device, BinaryOp::gelu_backward, out, gx, x, 1);
    return out;
  }
  TL_INTERNAL_ASSERT(false, "no derivative for ", name);
  return {};
}
}  // namespace

#define TL_DEFINE_UNARY_FLOAT(NAME)                                                               \
  Tensor Tensor::NAME() const {                                                                   \
    Tensor out = forward([&] { return unary_float<UnaryOp::NAME>(#NAME, *this); });               \
    record(out, #NAME, {this}, {*this, out}, [](const variable_list& g, const variable_list& s) { \
      return variable_list{unary_derivative(#NAME, g[0], s[0], s[1])};                            \
    });                                                                                           \
    return out;                                                                                   \
  }                                                                                               \
  Tensor& Tensor::NAME##_() {                                                                     \
    if (autograd::needs_grad({this}))                                                             \
      return inplace_with_grad(*this, #NAME "_", [](const Tensor& s) { return s.NAME(); });       \
    unary_float<UnaryOp::NAME>(#NAME "_", *this, this);                                           \
    return *this;                                                                                 \
  }                                                                                               \
  Tensor NAME(const Tensor& t) {                                                                  \
    return t.NAME();                                                                              \
  }
TL_DEFINE_UNARY_FLOAT(exp)
TL_DEFINE_UNARY_FLOAT(log)
TL_DEFINE_UNARY_FLOAT(sqrt)
TL_DEFINE_UNARY_FLOAT(rsqrt)
TL_DEFINE_UNARY_FLOAT(sin)
TL_DEFINE_UNARY_FLOAT(cos)
TL_DEFINE_UNARY_FLOAT(tanh)
TL_DEFINE_UNARY_FLOAT(sigmoid)
TL_DEFINE_UNARY_FLOAT(gelu)
TL_DEFINE_UNARY_FLOAT(reciprocal)
#undef TL_DEFINE_UNARY_FLOAT

Tensor neg(const Tensor& t) {
  return t.neg();
}
Tensor abs(const Tensor& t) {
  return t.abs();
}
Tensor relu(const Tensor& t) {
  return t.relu();
}

// ---- Comparisons of whole tensors ---------------------------------------------------------

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return tl::eq(a, b).to(kInt64).sum().item<int64_t>() == a.numel();
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  auto shape = broadcast_shapes(a.sizes(), b.sizes());
  Tensor x = a.cpu().to(kFloat64).expand(shape).contiguous();
  Tensor y = b.cpu().to(kFloat64).expand(shape).contiguous();
  const double* p = x.data_ptr<double>();
  const double* q = y.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(p[i]) || std::isnan(q[i])) return false;
    if (p[i] == q[i]) continue;  // equal infinities
    if (!(std::abs(p[i] - q[i]) <= atol + rtol * std::abs(q[i]))) return false;
  }
  return true;
}

// ---- Operators ----------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, const Scalar& b) {
  return add(a, b);
}
Tensor operator+(const Scalar& a, const Tensor& b) {
  return add(b, a);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, const Scalar& b) {
  return sub(a, b);
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::sub, wrap(a), tensor_op(b)); });
  record(out, "Rsub", {&b}, {},
         [](const variable_list& g, const variable_list&) { return variable_list{-g[0]}; });
  return out;
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, const Scalar& b) {
  return mul(a, b);
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return mul(b, a);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, const Scalar& b) {
  return div(a, b);
}
Tensor operator/(const Scalar& a, const Tensor& b) {
  Tensor out = forward([&] { return binary(BinaryOp::div, wrap(a), tensor_op(b)); });
  record(out, "Rdiv", {&b}, {b, out}, [](const variable_list& g, const variable_list& s) {
    return variable_list{-g[0] * s[1] / s[0]};
  });
  return out;
}
Tensor operator-(const Tensor& a) {
  return a.neg();
}
Tensor operator==(const Tensor& a, const Tensor& b) {
  return a.eq(b);
}
Tensor operator==(const Tensor& a, const Scalar& b) {
  return a.eq(b);
}
Tensor operator!=(const Tensor& a, const Tensor& b) {
  return a.ne(b);
}
Tensor operator!=(const Tensor& a, const Scalar& b) {
  return a.ne(b);
}
Tensor operator<(const Tensor& a, const Tensor& b) {
  return a.lt(b);
}
Tensor operator<(const Tensor& a, const Scalar& b) {
  return a.lt(b);
}
Tensor operator<=(const Tensor& a, const Tensor& b) {
  return a.le(b);
}
Tensor operator<=(const Tensor& a, const Scalar& b) {
  return a.le(b);
}
Tensor operator>(const Tensor& a, const Tensor& b) {
  return a.gt(b);
}
Tensor operator>(const Tensor& a, const Scalar& b) {
  return a.gt(b);
}
Tensor operator>=(const Tensor& a, const Tensor& b) {
  return a.ge(b);
}
Tensor operator>=(const Tensor& a, const Scalar& b) {
  return a.ge(b);
}
Tensor& operator+=(Tensor& a, const Tensor& b) {
  return a.add_(b);
}
Tensor& operator+=(Tensor& a, const Scalar& b) {
  return a.add_(b);
}
Tensor& operator-=(Tensor& a, const Tensor& b) {
  return a.sub_(b);
}
Tensor& operator-=(Tensor& a, const Scalar& b) {
  return a.sub_(b);
}
Tensor& operator*=(Tensor& a, const Tensor& b) {
  return a.mul_(b);
}
Tensor& operator*=(Tensor& a, const Scalar& b) {
  return a.mul_(b);
}
Tensor& operator/=(Tensor& a, const Tensor& b) {
  return a.div_(b);
}
Tensor& operator/=(Tensor& a, const Scalar& b) {
  return a.div_(b);
}

}  // namespace tl
