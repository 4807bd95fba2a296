// The front-ends of the reductions: sum, mean, prod, max/min, argmax/argmin, var/std,
// logsumexp, softmax and log_softmax (dtype rules, the row layout below, autograd); the loops
// are each backend's reduce_rows and softmax (the CPU's in cpu/reduce.cpp).
//
// Note [Reduction layout]
// Every reduction over a set of dims runs as a row reduction. The input is permuted so that
// the kept dims come first (in their order) and the reduced dims last, then made contiguous
// (free when it already is). Output element i then reduces the dense row [i*R, (i+1)*R) of
// that buffer, and the output, allocated contiguous with the kept dims in their original
// order (keepdim only inserts size-1 dims), is filled in the same order. Transposed, sliced
// and expanded inputs cost one copy; in exchange each op is one simple loop over a dense row.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensorlib/autograd/function.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/row_moments.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {
namespace {

// The input of a reduction laid out as dense rows (Note [Reduction layout]).
struct Rows {
  Tensor data;  // contiguous; row i is elements [i * row_len, (i + 1) * row_len)
  int64_t n_rows = 1;
  int64_t row_len = 1;
  std::vector<int64_t> out_sizes;  // the output's shape, honouring keepdim
};

Rows rows_of(const Tensor& t, const std::vector<bool>& reduced, bool keepdim) {
  Rows r;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (reduced[d]) {
      if (keepdim) r.out_sizes.push_back(1);
      continue;
    }
    perm.push_back(d);
    r.out_sizes.push_back(t.size(d));
    r.n_rows *= t.size(d);
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (!reduced[d]) continue;
    perm.push_back(d);
    r.row_len *= t.size(d);
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  r.data = (identity ? t : t.permute(perm)).contiguous();
  return r;
}

Rows make_rows(const Tensor& t, IntArrayRef dims, bool keepdim, const char* op) {
  return rows_of(t, detail::dim_mask(dims, t.dim(), op), keepdim);
}

// The row reduction `op` of r on its device's backend, into a new tensor of `out_dtype`;
// `indices` (int64, of the output's shape) receives max/min's positions when given.
Tensor reduce(detail::ReduceOp op, const Rows& r, ScalarType out_dtype, int64_t correction = 0,
              const Tensor& indices = Tensor()) {
  const Device device = r.data.device();
  Tensor out = empty(r.out_sizes, TensorOptions(out_dtype).device(device));
  detail::kernels_for(device).reduce_rows(op, out, indices, r.data, r.n_rows, r.row_len,
                                          correction);
  return out;
}

// sum and prod share dtype rules: bool and integer inputs give int64 unless a dtype is given,
// in which case the input is converted to it first.
enum class AccumulateOp { kSum, kProd };

template <AccumulateOp Op>
Tensor accumulate(const Tensor& t, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype,
                  const char* op) {
  const Device device = detail::check_device(op, {&t});
  const Tensor x = dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  const ScalarType out_dtype = dtype ? *dtype : (is_integral(t.dtype(), true) ? kInt64 : t.dtype());
  if constexpr (Op == AccumulateOp::kSum) {
    // Note [Sums over leading dimensions] (cpu/reduce.cpp): where the backend has it.
    if (Tensor out = detail::kernels_for(device).sum_leading(x, detail::dim_mask(dims, x.dim(), op),
                                                             keepdim, out_dtype);
        out.defined())
      return out;
  }
  return reduce(Op == AccumulateOp::kSum ? detail::ReduceOp::sum : detail::ReduceOp::prod,
                make_rows(x, dims, keepdim, op), out_dtype);
}

Tensor mean_impl(const Tensor& t, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  detail::check_device("mean", {&t});
  if (dtype) {
    TL_CHECK(is_floating_point(*dtype),
             "mean(): could not infer output dtype. Optional dtype must be either a floating "
             "point or complex dtype. Got: ",
             *dtype);
  } else {
    TL_CHECK(is_floating_point(t.dtype()),
             "mean(): could not infer output dtype. Input dtype must be either a floating point "
             "or complex dtype. Got: ",
             t.dtype());
  }
  const Tensor x = dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  const Rows r = make_rows(x, dims, keepdim, "mean");
  return reduce(detail::ReduceOp::mean, r, x.dtype());
}

void check_nonempty_reduction(const Tensor& t, std::optional<int64_t> dim, const char* op) {
  if (!dim) {
    TL_CHECK(t.numel() > 0, op,
             "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
             "reduction dim with the 'dim' argument.");
  } else if (t.dim() > 0) {
    TL_CHECK(t.size(*dim) > 0, op, "(): Expected reduction dim ", *dim,
             " to have non-zero size (input shape ", t.sizes(), ")");
  }
}

// max()/min() over all elements: a 0-dim tensor of the input's dtype.
template <bool kMax>
Tensor extreme_all(const Tensor& t, const char* op) {
  detail::check_device(op, {&t});
  check_nonempty_reduction(t, std::nullopt, op);
  const Rows r = make_rows(t, {}, false, op);
  return reduce(kMax ? detail::ReduceOp::max : detail::ReduceOp::min, r, t.dtype());
}

// max(dim)/min(dim): (values, int64 indices).
template <bool kMax>
std::tuple<Tensor, Tensor> extreme_dim(const Tensor& t, int64_t dim, bool keepdim, const char* op) {
  const Device device = detail::check_device(op, {&t});
  const int64_t d = detail::wrap_dim(dim, t.dim());
  check_nonempty_reduction(t, d, op);
  const Rows r = make_rows(t, IntArrayRef(d), keepdim, op);
  Tensor indices = empty(r.out_sizes, TensorOptions(kInt64).device(device));
  Tensor values =
      reduce(kMax ? detail::ReduceOp::max : detail::ReduceOp::min, r, t.dtype(), 0, indices);
  return {values, indices};
}

// argmax/argmin; without a dim over the flattened input (keepdim then gives all-1 sizes).
template <bool kMax>
Tensor arg_extreme(const Tensor& t, std::optional<int64_t> dim, bool keepdim, const char* op) {
  detail::check_device(op, {&t});
  std::optional<int64_t> d;
  if (dim) d = detail::wrap_dim(*dim, t.dim());
  check_nonempty_reduction(t, d, op);
  const Rows r = d ? make_rows(t, IntArrayRef(*d), keepdim, op) : make_rows(t, {}, keepdim, op);
  return reduce(kMax ? detail::ReduceOp::argmax : detail::ReduceOp::argmin, r, kInt64);
}

// var and std: the correction is 1 when unbiased.
Tensor variance(const Tensor& t, IntArrayRef dims, bool unbiased, bool keepdim, bool take_sqrt) {
  const char* op = take_sqrt ? "std" : "var";
  detail::check_device(op, {&t});
  TL_CHECK(is_floating_point(t.dtype()),
           "std and var only support floating point and complex dtypes, but ", op,
           "() got an input of dtype ", t.dtype());
  const int64_t correction = unbiased ? 1 : 0;
  const Rows r = make_rows(t, dims, keepdim, op);
  return reduce(take_sqrt ? detail::ReduceOp::std : detail::ReduceOp::var, r, t.dtype(),
                correction);
}

// Softmax and log-softmax over one dim: the input viewed as [outer, D, inner].
template <bool kLog>
Tensor softmax_impl(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype, const char* op) {
  const Device device = detail::check_device(op, {&t});
  const Tensor x = (dtype && *dtype != t.dtype() ? t.to(*dtype) : t).contiguous();
  TL_CHECK(is_floating_point(x.dtype()), op,
           "(): expected a floating point input (or a floating dtype argument), got ", x.dtype());
  const int64_t d = detail::wrap_dim(dim, x.dim());
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) outer *= x.size(i);
    if (i == d) len = x.size(i);
    if (i > d) inner *= x.size(i);
  }
  Tensor out = empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  detail::kernels_for(device).softmax(out, x, outer, len, inner, kLog);
  return out;
}

}  // namespace

// ---- Free functions ---------------------------------------------------------------------------
// Each records its derivative (tensorlib/autograd); the kernels above run without recording.

namespace {
using autograd::forward_no_grad;
using autograd::record;
using autograd::variable_list;

// The reduced dims of `sizes` (all when `dims` is empty), wrapped and sorted.
std::vector<int64_t> reduced_dims(IntArrayRef dims, int64_t ndim) {
  std::vector<int64_t> out;
  auto mask = detail::dim_mask(dims, ndim, "reduce");
  for (int64_t i = 0; i < ndim; ++i)
    if (mask[i]) out.push_back(i);
  return out;
}

// A reduced result (or its gradient) with the reduced dims put back as size 1, so it
// broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return t;
  Tensor r = t;
  for (int64_t d : dims) r = r.unsqueeze(d);
  return r;
}

int64_t reduced_count(IntArrayRef sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}
}  // namespace

Tensor sum(const Tensor& t, std::optional<ScalarType> dtype) {
  return tl::sum(t, {}, false, dtype);
}

Tensor sum(const Tensor& t, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  Tensor out = forward_no_grad(
      [&] { return accumulate<AccumulateOp::kSum>(t, dims, keepdim, dtype, "sum"); });
  record(out, "Sum", {&t}, {},
         [sizes = t.sizes().vec(), rd = reduced_dims(dims, t.dim()), keepdim, dt = t.dtype()](
             const variable_list& g, const variable_list&) {
           return variable_list{unsqueeze_reduced(g[0], rd, keepdim).expand(sizes).to(dt)};
         });
  return out;
}

Tensor mean(const Tensor& t, std::optional<ScalarType> dtype) {
  return tl::mean(t, {}, false, dtype);
}

Tensor mean(const Tensor& t, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  Tensor out = forward_no_grad([&] { return mean_impl(t, dims, keepdim, dtype); });
  record(out, "Mean", {&t}, {},
         [sizes = t.sizes().vec(), rd = reduced_dims(dims, t.dim()), keepdim, dt = t.dtype()](
             const variable_list& g, const variable_list&) {
           double n = static_cast<double>(reduced_count(sizes, rd));
           return variable_list{(unsqueeze_reduced(g[0], rd, keepdim) / n).expand(sizes).to(dt)};
         });
  return out;
}

Tensor prod(const Tensor& t, std::optional<ScalarType> dtype) {
  Tensor out =
      forward_no_grad([&] { return accumulate<AccumulateOp::kProd>(t, {}, false, dtype, "prod"); });
  // d/dx_i prod(x) = prod(x) / x_i (inputs without zeros).
  record(out, "Prod", {&t}, {t, out}, [](const variable_list& g, const variable_list& s) {
    return variable_list{g[0] * s[1] / s[0]};
  });
  return out;
}

Tensor prod(const Tensor& t, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  Tensor out = forward_no_grad(
      [&] { return accumulate<AccumulateOp::kProd>(t, IntArrayRef(dim), keepdim, dtype, "prod"); });
  record(out, "Prod", {&t}, {t, out},
         [rd = reduced_dims(IntArrayRef(dim), t.dim()), keepdim](const variable_list& g,
                                                                 const variable_list& s) {
           return variable_list{unsqueeze_reduced(g[0] * s[1], rd, keepdim) / s[0]};
         });
  return out;
}

namespace {
// The gradient of a full max/min flows to every element equal to the result, shared evenly
// (as PyTorch's amax/amin backward).
Tensor extreme_all_grad(const Tensor& g, const Tensor& input, const Tensor& result) {
  Tensor mask = (input == result).to(g.dtype());
  return mask * (g / mask.sum());
}
// With a dim, it flows to the element the index names.
Tensor extreme_dim_grad(const Tensor& g, const Tensor& indices, IntArrayRef sizes, int64_t dim,
                        bool keepdim) {
  int64_t d = detail::wrap_dim(dim, static_cast<int64_t>(sizes.size()));
  Tensor gk = keepdim ? g : g.unsqueeze(d);
  Tensor ik = keepdim ? indices : indices.unsqueeze(d);
  return tl::zeros(sizes, g.options()).scatter_add(d, ik, gk);
}
template <bool kMax>
std::tuple<Tensor, Tensor> extreme_dim_grad_wrapped(const Tensor& t, int64_t dim, bool keepdim,
                                                    const char* op) {
  auto [values, indices] = forward_no_grad([&] { return extreme_dim<kMax>(t, dim, keepdim, op); });
  record(values, kMax ? "Max" : "Min", {&t}, {indices},
         [sizes = t.sizes().vec(), dim, keepdim](const variable_list& g, const variable_list& s) {
           return variable_list{extreme_dim_grad(g[0], s[0], sizes, dim, keepdim)};
         });
  return {values, indices};
}
template <bool kMax>
Tensor extreme_all_wrapped(const Tensor& t, const char* op) {
  Tensor out = forward_no_grad([&] { return extreme_all<kMax>(t, op); });
  record(out, kMax ? "Max" : "Min", {&t}, {t, out},
         [](const variable_list& g, const variable_list& s) {
           return variable_list{extreme_all_grad(g[0], s[0], s[1])};
         });
  return out;
}
}  // namespace

Tensor max(const Tensor& t) {
  return extreme_all_wrapped<true>(t, "max");
}

std::tuple<Tensor, Tensor> max(const Tensor& t, int64_t dim, bool keepdim) {
  return extreme_dim_grad_wrapped<true>(t, dim, keepdim, "max");
}

Tensor min(const Tensor& t) {
  return extreme_all_wrapped<false>(t, "min");
}

std::tuple<Tensor, Tensor> min(const Tensor& t, int64_t dim, bool keepdim) {
  return extreme_dim_grad_wrapped<false>(t, dim, keepdim, "min");
}

Tensor argmax(const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme<true>(t, dim, keepdim, "argmax");
}

Tensor argmin(const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme<false>(t, dim, keepdim, "argmin");
}

namespace {
// d var / dx_i = 2 (x_i - mean) / (N - correction); d std = d var / (2 std).
Tensor variance_grad(const Tensor& g, const Tensor& x, const Tensor& result,
                     const std::vector<int64_t>& rd, bool unbiased, bool keepdim, bool is_std) {
  double n = static_cast<double>(reduced_count(x.sizes(), rd));
  Tensor mu = x.mean(rd, /*keepdim=*/true);
  Tensor gk = unsqueeze_reduced(g, rd, keepdim);
  if (is_std) gk = gk / (unsqueeze_reduced(result, rd, keepdim) * 2);
  return gk * (x - mu) * (2.0 / (n - (unbiased ? 1 : 0)));
}
}  // namespace

Tensor var(const Tensor& t, IntArrayRef dims, bool unbiased, bool keepdim) {
  Tensor out = forward_no_grad([&] { return variance(t, dims, unbiased, keepdim, false); });
  record(out, "Var", {&t}, {t},
         [rd = reduced_dims(dims, t.dim()), unbiased, keepdim](const variable_list& g,
                                                               const variable_list& s) {
           return variable_list{variance_grad(g[0], s[0], Tensor(), rd, unbiased, keepdim, false)};
         });
  return out;
}

Tensor std(const Tensor& t, IntArrayRef dims, bool unbiased, bool keepdim) {
  Tensor out = forward_no_grad([&] { return variance(t, dims, unbiased, keepdim, true); });
  record(out, "Std", {&t}, {t, out},
         [rd = reduced_dims(dims, t.dim()), unbiased, keepdim](const variable_list& g,
                                                               const variable_list& s) {
           return variable_list{variance_grad(g[0], s[0], s[1], rd, unbiased, keepdim, true)};
         });
  return out;
}

// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the row maximum, so large
// inputs do not overflow; an infinite m is not subtracted (all -inf gives -inf, +inf gives
// +inf). Integer inputs are computed in the default floating dtype, as in PyTorch.
Tensor logsumexp(const Tensor& t, IntArrayRef dims, bool keepdim) {
  detail::check_device("logsumexp", {&t});
  Tensor out = forward_no_grad([&] {
    const Tensor x = is_integral(t.dtype(), true) ? t.to(get_default_dtype()) : t;
    const Rows r = make_rows(x, dims, keepdim, "logsumexp");
    return reduce(detail::ReduceOp::logsumexp, r, x.dtype());
  });
  // d/dx_i = exp(x_i - logsumexp(x)), the softmax.
  record(
      out, "Logsumexp", {&t}, {t, out},
      [rd = reduced_dims(dims, t.dim()), keepdim](const variable_list& g, const variable_list& s) {
        Tensor r = unsqueeze_reduced(s[1], rd, keepdim);
        return variable_list{unsqueeze_reduced(g[0], rd, keepdim) * (s[0] - r).exp()};
      });
  return out;
}

Tensor softmax(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor out = forward_no_grad([&] { return softmax_impl<false>(t, dim, dtype, "softmax"); });
  // dx = y * (g - sum(g * y)) along dim.
  record(out, "Softmax", {&t}, {out},
         [dim, dt = t.dtype()](const variable_list& g, const variable_list& s) {
           const Tensor& y = s[0];
           return variable_list{(y * (g[0] - (g[0] * y).sum({dim}, true))).to(dt)};
         });
  return out;
}

Tensor log_softmax(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor out = forward_no_grad([&] { return softmax_impl<true>(t, dim, dtype, "log_softmax"); });
  // dx = g - exp(y) * sum(g) along dim.
  record(out, "LogSoftmax", {&t}, {out},
         [dim, dt = t.dtype()](const variable_list& g, const variable_list& s) {
           return variable_list{(g[0] - s[0].exp() * g[0].sum({dim}, true)).to(dt)};
         });
  return out;
}

// ---- Tensor methods ---------------------------------------------------------------------------

Tensor Tensor::sum(std::optional<ScalarType> dtype) const {
  return tl::sum(*this, dtype);
}
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) const {
  return tl::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean(std::optional<ScalarType> dtype) const {
  return tl::mean(*this, dtype);
}
Tensor Tensor::mean(IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) const {
  return tl::mean(*this, dims, keepdim, dtype);
}
Tensor Tensor::prod(std::optional<ScalarType> dtype) const {
  return tl::prod(*this, dtype);
}
Tensor Tensor::prod(int64_t dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return tl::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::max() const {
  return tl::max(*this);
}
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return tl::max(*this, dim, keepdim);
}
Tensor Tensor::min() const {
  return tl::min(*this);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return tl::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return tl::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return tl::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(bool unbiased) const {
  return tl::var(*this, {}, unbiased, false);
}
Tensor Tensor::var(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return tl::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(bool unbiased) const {
  return tl::std(*this, {}, unbiased, false);
}
Tensor Tensor::std(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return tl::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return tl::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return tl::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return tl::log_softmax(*this, dim, dtype);
}

}  // namespace tl
