// Max, average and adaptive average pooling, device-neutral, and their modules: the arguments
// and output sizes as PyTorch's, then the backend's kernel (cpu/pooling.cpp) or, where it has
// none, the composition of nn/unfold.h (Note [Image kernels] in core/kernels.h).
#include "tensorlib/nn/pooling.h"

#include <limits>

#include "tensorlib/autograd/function.h"
#include "tensorlib/core/image_windows.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace {

using autograd::variable_list;
using tl::detail::Window2d;

// ---- shared checks -----------------------------------------------------------------------

void check_window(const char* op, IntPair kernel, IntPair stride, IntPair padding,
                  IntPair dilation) {
  TL_CHECK(kernel.h > 0 && kernel.w > 0, op, ": kernel_size must be positive, got ", kernel);
  TL_CHECK(stride.h > 0 && stride.w > 0, op, ": stride must be positive, got ", stride);
  TL_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation must be positive, got ", dilation);
  TL_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding must be non-negative, got ", padding);
}

// ATen's pooling_output_shape: floor or ceil division; with ceil_mode the last window must
// start inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The geometry of a pooling of 4-D x: its planes, window and output size.
Window2d pooled_window(const char* op, const Tensor& x, IntPair kernel, IntPair stride,
                       IntPair padding, IntPair dilation, bool ceil_mode) {
  Window2d g{x.size(0), x.size(1), x.size(2), x.size(3),  kernel.h,   kernel.w, stride.h,
             stride.w,  padding.h, padding.w, dilation.h, dilation.w, 0,        0};
  g.out_h = pooled_size(g.height, kernel.h, stride.h, padding.h, dilation.h, ceil_mode);
  g.out_w = pooled_size(g.width, kernel.w, stride.w, padding.w, dilation.w, ceil_mode);
  TL_CHECK(g.out_h > 0 && g.out_w > 0, op, ": input of shape ", x.sizes(), " gives an output of ",
           g.out_h, " x ", g.out_w, " with kernel_size ", kernel, ", stride ", stride, ", padding ",
           padding, " and dilation ", dilation, ": output size is too small");
  return g;
}

// Max pooling composed (on a backend without the kernel: CUDA): the windows unfolded with -inf
// padding, the maximum of each (the first on ties, NaN first, as the CPU kernel), and its
// position turned into the flat index into the input plane that PyTorch returns. The gradient
// flows through max and unfold (col2im).
std::tuple<Tensor, Tensor> max_pool2d_composed(const Tensor& input, const Window2d& g) {
  const int64_t n = g.batch, c = g.channels;
  Window2d planes = g;
  planes.batch = n * c;
  planes.channels = 1;
  const Tensor cols = detail::unfold2d(input.reshape({n * c, 1, g.height, g.width}), planes,
                                       -std::numeric_limits<double>::infinity());
  auto [values, at] = cols.max(1);  // [n*c, out_h*out_w]
  const TensorOptions i64 = TensorOptions(kInt64).device(input.device());
  // at = ki * kw + kj; the pixel is (oh*sh - ph + ki*dh, ow*sw - pw + kj*dw).
  const Tensor ki = at.div(g.kw).to(kInt64), kj = at - ki * g.kw;
  const Tensor oh =
      arange(g.out_h, i64).view({g.out_h, 1}).expand({g.out_h, g.out_w}).reshape({-1});
  const Tensor ow =
      arange(g.out_w, i64).view({1, g.out_w}).expand({g.out_h, g.out_w}).reshape({-1});
  const Tensor hh = oh * g.sh - g.ph + ki * g.dh, ww = ow * g.sw - g.pw + kj * g.dw;
  Tensor indices = (hh * g.width + ww).view({n, c, g.out_h, g.out_w});
  return {values.view({n, c, g.out_h, g.out_w}), indices};
}

}  // namespace

namespace detail {

// The per-axis weights of average pooling on CUDA (Note [Separable resampling] in
// nn/unfold.cpp): 1 / the axis's factor of the divisor over the window's span; with a
// divisor_override, 1 over the rows and 1 / override over the columns.
AxisWeights avg_pool_axis(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                          bool count_include_pad, std::optional<int64_t> divisor_override,
                          bool carries_override) {
  AxisWeights a(out, in);
  for (int64_t o = 0; o < out; ++o) {
    const tl::detail::AvgSpan s = tl::detail::avg_span(o, in, kernel, stride, pad);
    const double weight = divisor_override
                              ? (carries_override ? 1.0 / double(*divisor_override) : 1.0)
                          : count_include_pad ? 1.0 / double(s.padded)
                                              : 1.0 / double(s.hi - s.lo);
    for (int64_t i = s.lo; i < s.hi; ++i) a.at(o, i) = weight;
  }
  return a;
}

// Adaptive pooling's per-axis weights on CUDA (Note [Separable resampling]).
AxisWeights adaptive_pool_axis(int64_t out, int64_t in) {
  AxisWeights a(out, in);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t lo = tl::detail::adaptive_start(o, out, in),
                  hi = tl::detail::adaptive_end(o, out, in);
    for (int64_t i = lo; i < hi; ++i) a.at(o, i) = 1.0 / double(hi - lo);
  }
  return a;
}

}  // namespace detail

namespace functional {

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntPair kernel_size,
                                                   std::optional<IntPair> stride_opt,
                                                   IntPair padding, IntPair dilation,
                                                   bool ceil_mode) {
  constexpr const char* kOp = "max_pool2d";
  detail::check_image_input(kOp, input);
  const IntPair stride = stride_opt.value_or(kernel_size);
  check_window(kOp, kernel_size, stride, padding, dilation);
  TL_CHECK(2 * padding.h <= (kernel_size.h - 1) * dilation.h + 1 &&
               2 * padding.w <= (kernel_size.w - 1) * dilation.w + 1,
           kOp, ": padding ", padding, " should be at most half of the effective kernel size (",
           kernel_size, " with dilation ", dilation, ")");
  if (input.dim() == 3) {
    auto [out, ix] = max_pool2d_with_indices(input.unsqueeze(0), kernel_size, stride, padding,
                                             dilation, ceil_mode);
    return {out.squeeze(0), ix.squeeze(0)};
  }
  const Window2d g = pooled_window(kOp, input, kernel_size, stride, padding, dilation, ceil_mode);
  const tl::detail::Kernels& kernels = tl::detail::kernels_for(input.device());
  Tensor indices;
  Tensor out = detail::run_image_op(
      kOp, "MaxPool2DWithIndices", input, indices,
      [&] { return kernels.max_pool2d(input, g, indices); },
      [g](const Tensor& gi, const Tensor& go, const variable_list& saved) {
        tl::detail::kernels_for(gi.device()).max_pool2d_backward(gi, go, saved[0], g);
      });
  if (!out.defined()) {
    detail::check_composable(kOp, input);
    return max_pool2d_composed(input, g);
  }
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride,
                  IntPair padding, IntPair dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride_opt,
                  IntPair padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  constexpr const char* kOp = "avg_pool2d";
  detail::check_image_input(kOp, input);
  const IntPair stride = stride_opt.value_or(kernel_size);
  check_window(kOp, kernel_size, stride, padding, 1);
  TL_CHECK(2 * padding.h <= kernel_size.h && 2 * padding.w <= kernel_size.w, kOp, ": padding ",
           padding, " should be at most half of kernel_size ", kernel_size);
  TL_CHECK(!divisor_override || *divisor_override != 0, kOp, ": divisor_override must be non-zero");
  if (input.dim() == 3)
    return avg_pool2d(input.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override)
        .squeeze(0);
  const Window2d g = pooled_window(kOp, input, kernel_size, stride, padding, 1, ceil_mode);
  const tl::detail::AvgPool2d a{count_include_pad, divisor_override};
  const tl::detail::Kernels& kernels = tl::detail::kernels_for(input.device());
  Tensor out = detail::run_image_op(
      kOp, "AvgPool2D", input, Tensor(), [&] { return kernels.avg_pool2d(input, g, a); },
      [g, a](const Tensor& gi, const Tensor& go, const variable_list&) {
        tl::detail::kernels_for(gi.device()).avg_pool2d_backward(gi, go, g, a);
      });
  if (out.defined()) return out;
  detail::check_composable(kOp, input);
  return detail::resample2d(input,
                            detail::avg_pool_axis(g.out_h, g.height, g.kh, g.sh, g.ph,
                                                  count_include_pad, divisor_override, false),
                            detail::avg_pool_axis(g.out_w, g.width, g.kw, g.sw, g.pw,
                                                  count_include_pad, divisor_override, true));
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntPair output_size) {
  constexpr const char* kOp = "adaptive_avg_pool2d";
  detail::check_image_input(kOp, input);
  TL_CHECK(output_size.h > 0 && output_size.w > 0, kOp, ": output_size must be positive, got ",
           output_size);
  if (input.dim() == 3) return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0);
  Window2d g = detail::image_window(input);
  TL_CHECK(g.height > 0 && g.width > 0, kOp,
           ": expected an input with non-empty H and W, got shape ", input.sizes());
  g.out_h = output_size.h;
  g.out_w = output_size.w;
  const tl::detail::Kernels& kernels = tl::detail::kernels_for(input.device());
  Tensor out = detail::run_image_op(
      kOp, "AdaptiveAvgPool2D", input, Tensor(),
      [&] { return kernels.adaptive_avg_pool2d(input, g); },
      [g](const Tensor& gi, const Tensor& go, const variable_list&) {
        tl::detail::kernels_for(gi.device()).adaptive_avg_pool2d_backward(gi, go, g);
      });
  if (out.defined()) return out;
  detail::check_composable(kOp, input);
  return detail::resample2d(input, detail::adaptive_pool_axis(g.out_h, g.height),
                            detail::adaptive_pool_axis(g.out_w, g.width));
}

}  // namespace functional

MaxPool2d::MaxPool2d(IntPair kernel, std::optional<IntPair> stride_opt, IntPair pad, IntPair dil,
                     bool ceil)
    : Module("max_pool2d"),
      kernel_size(kernel),
      stride(stride_opt.value_or(kernel)),
      padding(pad),
      dilation(dil),
      ceil_mode(ceil) {
  check_window("MaxPool2d", kernel_size, stride, padding, dilation);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return functional::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

AvgPool2d::AvgPool2d(IntPair kernel, std::optional<IntPair> stride_opt, IntPair pad, bool ceil,
                     bool include_pad, std::optional<int64_t> divisor)
    : Module("avg_pool2d"),
      kernel_size(kernel),
      stride(stride_opt.value_or(kernel)),
      padding(pad),
      ceil_mode(ceil),
      count_include_pad(include_pad),
      divisor_override(divisor) {
  check_window("AvgPool2d", kernel_size, stride, padding, 1);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                divisor_override);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntPair size)
    : Module("adaptive_avg_pool2d"), output_size(size) {
  TL_CHECK(output_size.h > 0 && output_size.w > 0,
           "AdaptiveAvgPool2d: output_size must be positive, got ", output_size);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return functional::adaptive_avg_pool2d(x, output_size);
}

}  // namespace tl::nn
