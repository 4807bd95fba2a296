// conv2d and conv_transpose2d, device-neutral, and their modules: the arguments checked as
// PyTorch checks them, then the backend's kernel (cpu/conv.cpp) or, where it has none, the
// composition of nn/unfold.h (Note [Image kernels] in core/kernels.h).
#include "tensorlib/nn/conv.h"

#include <algorithm>
#include <cmath>

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace {

using autograd::variable_list;
using detail::check_no_double_backward;

// What both ops check: one device, one floating dtype throughout, a 4-D weight, sane
// hyper-parameters.
void check_common(const char* op, const char* weight_layout, const Tensor& input,
                  const Tensor& weight, const Tensor& bias, IntPair stride, IntPair padding,
                  IntPair dilation, int64_t groups) {
  TL_CHECK(input.defined() && weight.defined(), op, ": input and weight must be defined");
  tl::detail::check_device(op, {&input, &weight});
  detail::check_image_dtype(op, input);
  TL_CHECK(weight.dtype() == input.dtype(), op, ": expected weight with the input's dtype ",
           input.dtype(), ", got ", weight.dtype());
  TL_CHECK(input.dim() == 3 || input.dim() == 4, op,
           ": expected a 3-D (unbatched [C, H, W]) or 4-D (batched [N, C, H, W]) input, got a ",
           input.dim(), "-D tensor of shape ", input.sizes());
  TL_CHECK(weight.dim() == 4, op, ": expected weight of shape ", weight_layout, ", got a ",
           weight.dim(), "-D tensor of shape ", weight.sizes());
  TL_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  TL_CHECK(stride.h > 0 && stride.w > 0, op, ": stride must be positive, got ", stride);
  TL_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding must be non-negative, got ", padding);
  TL_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation must be positive, got ", dilation);
  if (bias.defined()) {
    tl::detail::check_device(op, {&input, &bias});
    TL_CHECK(bias.dtype() == input.dtype(), op, ": expected bias with the input's dtype ",
             input.dtype(), ", got ", bias.dtype());
  }
}

void check_bias(const char* op, const Tensor& bias, int64_t out_channels) {
  TL_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out_channels), op,
           ": expected bias of shape [", out_channels, "] (one per output channel), got shape ",
           bias.sizes());
}

// The kernel's result, with one autograd node that saves only the input and the weight
// (backward recomputes the columns, as PyTorch's); undefined where the backend has no kernel
// (Note [Image kernels] in core/kernels.h) and the caller composes the op.
Tensor run_conv(const char* op, bool transposed, const Tensor& input, const Tensor& weight,
                const Tensor& bias, const tl::detail::Window2d& win, int64_t groups) {
  const tl::detail::Kernels& kernels = tl::detail::kernels_for(input.device());
  Tensor out;
  {
    const NoGradGuard no_grad;
    out = transposed ? kernels.conv_transpose2d(input, weight, bias, win, groups)
                     : kernels.conv2d(input, weight, bias, win, groups);
  }
  if (!out.defined()) return out;
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const int64_t out_channels = out.size(1);
  autograd::record(out, "Convolution", {&input, &weight, &bias}, {input, weight},
                   [=](const variable_list& g, const variable_list& saved) {
                     check_no_double_backward(op);
                     const Tensor &x = saved[0], &w = saved[1];
                     Tensor gx = need_x ? empty(x.sizes(), x.options()) : Tensor();
                     Tensor gw = need_w ? empty(w.sizes(), w.options()) : Tensor();
                     Tensor gb = need_b ? empty({out_channels}, w.options()) : Tensor();
                     const tl::detail::Kernels& k = tl::detail::kernels_for(x.device());
                     if (transposed) {
                       k.conv_transpose2d_backward(g[0], x, w, gx, gw, gb, win, groups);
                     } else {
                       k.conv2d_backward(g[0], x, w, gx, gw, gb, win, groups);
                     }
                     return variable_list{gx, gw, gb};
                   });
  return out;
}

}  // namespace

namespace functional {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntPair stride,
              IntPair padding, IntPair dilation, int64_t groups) {
  constexpr const char* kLayout = "[out_channels, in_channels / groups, kH, kW]";
  check_common("conv2d", kLayout, input, weight, bias, stride, padding, dilation, groups);
  if (input.dim() == 3)
    return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  const int64_t n = input.size(0), c_in = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t c_out = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  TL_CHECK(c_out % groups == 0, "conv2d: expected out_channels (weight.size(0) = ", c_out,
           ") divisible by groups = ", groups, ", weight of shape ", weight.sizes());
  TL_CHECK(c_in == weight.size(1) * groups, "conv2d: given groups=", groups,
           " and weight of shape ", weight.sizes(), " ", kLayout, ", expected input of shape ",
           input.sizes(), " to have ", weight.size(1) * groups, " channels, but got ", c_in,
           " channels instead");
  check_bias("conv2d", bias, c_out);
  const int64_t eff_kh = dilation.h * (kh - 1) + 1, eff_kw = dilation.w * (kw - 1) + 1;
  TL_CHECK(kh > 0 && kw > 0 && h + 2 * padding.h >= eff_kh && w + 2 * padding.w >= eff_kw,
           "conv2d: kernel size (", kh, " x ", kw, ") with dilation ", dilation, " spans (", eff_kh,
           " x ", eff_kw, "), larger than the padded input (", h + 2 * padding.h, " x ",
           w + 2 * padding.w, ") of input shape ", input.sizes());
  const int64_t oh = (h + 2 * padding.h - eff_kh) / stride.h + 1;
  const int64_t ow = (w + 2 * padding.w - eff_kw) / stride.w + 1;
  const tl::detail::Window2d win{n,          c_in,       h,        w,         kh,
                                 kw,         stride.h,   stride.w, padding.h, padding.w,
                                 dilation.h, dilation.w, oh,       ow};
  if (Tensor out = run_conv("conv2d", false, input, weight, bias, win, groups); out.defined())
    return out;
  detail::check_composable("conv2d", input);
  return detail::conv2d_unfolded(input, weight, bias, win, groups);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntPair stride, IntPair padding, IntPair output_padding, int64_t groups,
                        IntPair dilation) {
  constexpr const char* kLayout = "[in_channels, out_channels / groups, kH, kW]";
  check_common("conv_transpose2d", kLayout, input, weight, bias, stride, padding, dilation, groups);
  if (input.dim() == 3)
    return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding, output_padding,
                            groups, dilation)
        .squeeze(0);
  const int64_t n = input.size(0), c_in = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3);
  const int64_t c_out = weight.size(1) * groups;
  TL_CHECK(c_in == weight.size(0), "conv_transpose2d: expected input of shape ", input.sizes(),
           " to have weight.size(0) = ", weight.size(0), " channels (weight of shape ",
           weight.sizes(), " ", kLayout, "), but got ", c_in, " channels instead");
  TL_CHECK(c_in % groups == 0, "conv_transpose2d: expected in_channels = ", c_in,
           " divisible by groups = ", groups);
  TL_CHECK(output_padding.h >= 0 && output_padding.w >= 0 &&
               (output_padding.h < stride.h || output_padding.h < dilation.h) &&
               (output_padding.w < stride.w || output_padding.w < dilation.w),
           "conv_transpose2d: output_padding ", output_padding,
           " must be non-negative and smaller than either stride ", stride, " or dilation ",
           dilation);
  check_bias("conv_transpose2d", bias, c_out);
  const int64_t oh =
      (h - 1) * stride.h - 2 * padding.h + dilation.h * (kh - 1) + output_padding.h + 1;
  const int64_t ow =
      (w - 1) * stride.w - 2 * padding.w + dilation.w * (kw - 1) + output_padding.w + 1;
  TL_CHECK(kh > 0 && kw > 0 && oh > 0 && ow > 0, "conv_transpose2d: output size (", oh, " x ", ow,
           ") is too small for input shape ", input.sizes(), ", kernel (", kh, " x ", kw,
           "), stride ", stride, ", padding ", padding, " and dilation ", dilation);
  // The output's geometry, windows at the input's pixels.
  const tl::detail::Window2d win{n,          c_out,      oh,       ow,        kh,
                                 kw,         stride.h,   stride.w, padding.h, padding.w,
                                 dilation.h, dilation.w, h,        w};
  if (Tensor out = run_conv("conv_transpose2d", true, input, weight, bias, win, groups);
      out.defined())
    return out;
  detail::check_composable("conv_transpose2d", input);
  return detail::conv_transpose2d_folded(input, weight, bias, win, groups);
}

}  // namespace functional

namespace {

// kaiming_uniform_(a = sqrt(5)) and the bias rule of PyTorch's _ConvNd.reset_parameters both
// come to uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor uniform_init(IntArrayRef sizes, int64_t fan_in) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return tl::rand(sizes) * (2 * bound) - bound;
}

void check_module_args(const char* module, int64_t in, int64_t out, IntPair kernel,
                       int64_t groups) {
  TL_CHECK(in > 0 && out > 0, module, ": in_channels and out_channels must be positive, got ", in,
           " and ", out);
  TL_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, module, ": in_channels (", in,
           ") and out_channels (", out, ") must be divisible by groups, got groups = ", groups);
  TL_CHECK(kernel.h > 0 && kernel.w > 0, module, ": kernel_size must be positive, got ", kernel);
}

}  // namespace

Conv2d::Conv2d(const Conv2dOptions& o)
    : Module("conv2d"),
      options(
          (check_module_args("Conv2d", o.in_channels_, o.out_channels_, o.kernel_size_, o.groups_),
           o)),
      weight(register_parameter("weight", uniform_init({o.out_channels_, o.in_channels_ / o.groups_,
                                                        o.kernel_size_.h, o.kernel_size_.w},
                                                       o.in_channels_ / o.groups_ *
                                                           o.kernel_size_.h * o.kernel_size_.w))),
      bias(register_parameter(
          "bias", o.bias_ ? uniform_init({o.out_channels_}, o.in_channels_ / o.groups_ *
                                                                o.kernel_size_.h * o.kernel_size_.w)
                          : Tensor())) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride,
               IntPair padding, IntPair dilation, int64_t groups, bool with_bias)
    : Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)
                 .stride(stride)
                 .padding(padding)
                 .dilation(dilation)
                 .groups(groups)
                 .bias(with_bias)) {}

Tensor Conv2d::forward(const Tensor& x) {
  return functional::conv2d(x, weight, bias, options.stride_, options.padding_, options.dilation_,
                            options.groups_);
}

ConvTranspose2d::ConvTranspose2d(const ConvTranspose2dOptions& o)
    : Module("conv_transpose2d"),
      options((check_module_args("ConvTranspose2d", o.in_channels_, o.out_channels_, o.kernel_size_,
                                 o.groups_),
               o)),
      weight(register_parameter("weight", uniform_init({o.in_channels_, o.out_channels_ / o.groups_,
                                                        o.kernel_size_.h, o.kernel_size_.w},
                                                       o.out_channels_ / o.groups_ *
                                                           o.kernel_size_.h * o.kernel_size_.w))),
      bias(register_parameter(
          "bias", o.bias_ ? uniform_init({o.out_channels_}, o.out_channels_ / o.groups_ *
                                                                o.kernel_size_.h * o.kernel_size_.w)
                          : Tensor())) {}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size,
                                 IntPair stride, IntPair padding, IntPair output_padding,
                                 int64_t groups, bool with_bias, IntPair dilation)
    : ConvTranspose2d(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)
                          .stride(stride)
                          .padding(padding)
                          .output_padding(output_padding)
                          .groups(groups)
                          .bias(with_bias)
                          .dilation(dilation)) {}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return functional::conv_transpose2d(x, weight, bias, options.stride_, options.padding_,
                                      options.output_padding_, options.groups_, options.dilation_);
}

}  // namespace tl::nn
