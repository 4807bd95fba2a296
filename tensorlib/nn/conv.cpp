// conv2d and conv_transpose2d on the CPU: im2col + one BLAS product per group over chunks of
// images (Note [Convolution as one GEMM per group] in im2col.h), and their modules.
//
// conv_transpose2d is conv2d's backward-to-input run forward, so the two share every kernel:
// conv2d forward is im2col -> gemm -> NCHW, conv_transpose2d forward is channel-major ->
// gemm^T -> col2im, and each one's backward is the other's forward (plus the weight product).
// Backward recomputes the columns from the saved input instead of keeping them, so the saved
// activations are the input and weight only, as in PyTorch.
#include "tensorlib/nn/conv.h"

#include <algorithm>
#include <cmath>

#include "tensorlib/autograd/function.h"
#include "tensorlib/cpu/loops.h"
#include "tensorlib/nn/im2col.h"
#include "tensorlib/nn/image_util.h"
#include "tensorlib/nn/unfold.h"

namespace tl::nn {
namespace {

using autograd::variable_list;
using detail::check_no_double_backward;
using detail::dispatch_floating;
using detail::images_per_chunk;
using detail::WindowGeometry;

// What both ops check: CPU, float32/float64 throughout, a 4-D weight, sane hyper-parameters.
void check_common(const char* op, const char* weight_layout, const Tensor& input,
                  const Tensor& weight, const Tensor& bias, IntPair stride, IntPair padding,
                  IntPair dilation, int64_t groups) {
  TL_CHECK(input.defined() && weight.defined(), op, ": input and weight must be defined");
  tl::detail::check_device(op, {&input, &weight});
  TL_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op,
           ": expected a float32 or float64 input, got ", input.dtype());
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

// ---- conv2d -----------------------------------------------------------------------------

struct ConvShape {
  int64_t batch, in_channels, out_channels, groups;
  WindowGeometry g;  // conv2d: the input image; conv_transpose2d: the output image
};

template <typename T>
void conv2d_forward_kernel(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, out_g = s.out_channels / s.groups;
  const int64_t image = s.in_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = empty({g.rows() * nb * L}, scalar_type_of<T>());
  Tensor out_cm = nb > 1 ? empty({s.out_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    T* c = col.data_ptr<T>();
    // One image: the channel-major product is already NCHW, so it goes straight to y.
    T* dst = cnt == 1 ? y + n0 * s.out_channels * L : out_cm.data_ptr<T>();
    detail::im2col(x + n0 * image, cnt, g, c);
    for (int64_t grp = 0; grp < s.groups; ++grp)
      detail::gemm<T>(false, false, out_g, cols, rows_g, 1, w + grp * out_g * rows_g, rows_g,
                      c + grp * rows_g * cols, cols, 0, dst + grp * out_g * cols, cols);
    if (cnt == 1) {
      if (b)
        for (int64_t o = 0; o < s.out_channels; ++o)
          for (int64_t k = 0; k < L; ++k) dst[o * L + k] += b[o];
    } else {
      detail::from_channel_major(dst, cnt, s.out_channels, L, b, y + n0 * s.out_channels * L);
    }
  }
}

// gx, gw, gb may be null (not needed); gw and gb are overwritten.
template <typename T>
void conv2d_backward_kernel(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                            const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, out_g = s.out_channels / s.groups;
  const int64_t image = s.in_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = gx || gw ? empty({g.rows() * nb * L}, scalar_type_of<T>()) : Tensor();
  Tensor gy_cm = nb > 1 ? empty({s.out_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  if (gb) std::fill(gb, gb + s.out_channels, T(0));
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    const T* gyc = gy + n0 * s.out_channels * L;
    if (cnt > 1) {
      detail::to_channel_major(gyc, cnt, s.out_channels, L, gy_cm.data_ptr<T>());
      gyc = gy_cm.data_ptr<T>();
    }
    if (gb) detail::add_row_sums(gyc, s.out_channels, cols, gb);
    if (gw) {
      T* c = col.data_ptr<T>();
      detail::im2col(x + n0 * image, cnt, g, c);
      for (int64_t grp = 0; grp < s.groups; ++grp)
        detail::gemm<T>(false, true, out_g, rows_g, cols, 1, gyc + grp * out_g * cols, cols,
                        c + grp * rows_g * cols, cols, n0 == 0 ? 0 : 1, gw + grp * out_g * rows_g,
                        rows_g);
    }
    if (gx) {
      T* c = col.data_ptr<T>();
      for (int64_t grp = 0; grp < s.groups; ++grp)
        detail::gemm<T>(true, false, rows_g, cols, out_g, 1, w + grp * out_g * rows_g, rows_g,
                        gyc + grp * out_g * cols, cols, 0, c + grp * rows_g * cols, cols);
      detail::col2im(c, cnt, g, gx + n0 * image);
    }
  }
}

// ---- conv_transpose2d ---------------------------------------------------------------------
// Here g describes the *output* image (channels = out_channels) and its positions are the
// input's pixels; the weight is [in, out / groups, kH, kW], i.e. per group the transpose of
// conv2d's [out', rows'] matrix with out' = in / groups.

template <typename T>
void add_bias_planes(T* y, const T* b, int64_t batch, int64_t channels, int64_t spatial) {
  detail::parallel_items(batch * channels, batch * channels * spatial, [&](int64_t item) {
    const T v = b[item % channels];
    T* p = y + item * spatial;
    for (int64_t k = 0; k < spatial; ++k) p[k] += v;
  });
}

template <typename T>
void conv_transpose2d_forward_kernel(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, in_g = s.in_channels / s.groups;
  const int64_t out_image = s.out_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = empty({g.rows() * nb * L}, scalar_type_of<T>());
  Tensor x_cm = nb > 1 ? empty({s.in_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  for (int64_t n0 = 0; n0 < s.batch; n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    const T* xc = x + n0 * s.in_channels * L;
    if (cnt > 1) {
      detail::to_channel_major(xc, cnt, s.in_channels, L, x_cm.data_ptr<T>());
      xc = x_cm.data_ptr<T>();
    }
    T* c = col.data_ptr<T>();
    for (int64_t grp = 0; grp < s.groups; ++grp)
      detail::gemm<T>(true, false, rows_g, cols, in_g, 1, w + grp * in_g * rows_g, rows_g,
                      xc + grp * in_g * cols, cols, 0, c + grp * rows_g * cols, cols);
    detail::col2im(c, cnt, g, y + n0 * out_image);
  }
  if (b) add_bias_planes(y, b, s.batch, s.out_channels, g.height * g.width);
}

template <typename T>
void conv_transpose2d_backward_kernel(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                                      const ConvShape& s) {
  const WindowGeometry& g = s.g;
  const int64_t L = g.positions(), rows_g = g.rows() / s.groups, in_g = s.in_channels / s.groups;
  const int64_t out_image = s.out_channels * g.height * g.width;
  const int64_t nb = images_per_chunk(s.batch, g.rows() * L * int64_t(sizeof(T)));
  Tensor col = gx || gw ? empty({g.rows() * nb * L}, scalar_type_of<T>()) : Tensor();
  Tensor cm = nb > 1 ? empty({s.in_channels * nb * L}, scalar_type_of<T>()) : Tensor();
  if (gb) {
    std::fill(gb, gb + s.out_channels, T(0));
    for (int64_t n = 0; n < s.batch; ++n)
      detail::add_row_sums(gy + n * out_image, s.out_channels, g.height * g.width, gb);
  }
  for (int64_t n0 = 0; n0 < s.batch && (gx || gw); n0 += nb) {
    const int64_t cnt = std::min(nb, s.batch - n0);
    const int64_t cols = cnt * L;
    T* c = col.data_ptr<T>();
    detail::im2col(gy + n0 * out_image, cnt, g, c);
    if (gx) {
      T* dst = cnt == 1 ? gx + n0 * s.in_channels * L : cm.data_ptr<T>();
      for (int64_t grp = 0; grp < s.groups; ++grp)
        detail::gemm<T>(false, false, in_g, cols, rows_g, 1, w + grp * in_g * rows_g, rows_g,
                        c + grp * rows_g * cols, cols, 0, dst + grp * in_g * cols, cols);
      if (cnt > 1)
        detail::from_channel_major<T>(dst, cnt, s.in_channels, L, nullptr,
                                      gx + n0 * s.in_channels * L);
    }
    if (gw) {
      const T* xc = x + n0 * s.in_channels * L;
      if (cnt > 1) {
        detail::to_channel_major(xc, cnt, s.in_channels, L, cm.data_ptr<T>());
        xc = cm.data_ptr<T>();
      }
      for (int64_t grp = 0; grp < s.groups; ++grp)
        detail::gemm<T>(false, true, in_g, rows_g, cols, 1, xc + grp * in_g * cols, cols,
                        c + grp * rows_g * cols, cols, n0 == 0 ? 0 : 1, gw + grp * in_g * rows_g,
                        rows_g);
    }
  }
}

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mutable_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Runs `backward(gy, x, w, gx, gw, gb, shape)` for the gradients that are needed.
template <typename Kernel>
variable_list conv_backward(const char* op, const Tensor& grad, const Tensor& x, const Tensor& w,
                            const ConvShape& s, bool need_x, bool need_w, bool need_b,
                            Kernel kernel) {
  check_no_double_backward(op);
  const Tensor gy = grad.contiguous();
  Tensor gx = need_x ? empty(x.sizes(), x.dtype()) : Tensor();
  Tensor gw = need_w ? empty(w.sizes(), w.dtype()) : Tensor();
  Tensor gb = need_b ? empty({s.out_channels}, w.dtype()) : Tensor();
  dispatch_floating(x.dtype(), [&]<typename T>() {
    kernel.template operator()<T>(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr<T>(),
                                  mutable_ptr_or_null<T>(gx), mutable_ptr_or_null<T>(gw),
                                  mutable_ptr_or_null<T>(gb), s);
  });
  return {gx, gw, gb};
}

struct Conv2dBackward {
  template <typename T>
  void operator()(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                  const ConvShape& s) const {
    conv2d_backward_kernel<T>(gy, x, w, gx, gw, gb, s);
  }
};
struct ConvTranspose2dBackward {
  template <typename T>
  void operator()(const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb,
                  const ConvShape& s) const {
    conv_transpose2d_backward_kernel<T>(gy, x, w, gx, gw, gb, s);
  }
};

// What conv2d and conv_transpose2d share once their shapes are checked: contiguous operands,
// `forward` into a new [batch, out_channels, oh, ow] output, and one autograd node that saves
// only the input and the weight (backward recomputes the columns).
template <typename Forward, typename Backward>
Tensor run_conv(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                const ConvShape& s, int64_t oh, int64_t ow, Forward forward, Backward backward) {
  const Tensor x = input.contiguous(), wt = weight.contiguous();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = empty({s.batch, s.out_channels, oh, ow}, input.dtype());
  if (out.numel() > 0) {
    dispatch_floating(input.dtype(), [&]<typename T>() {
      forward(x.data_ptr<T>(), wt.data_ptr<T>(), ptr_or_null<T>(b), out.data_ptr<T>(), s);
    });
  }
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  autograd::record(
      out, "Convolution", {&input, &weight, &bias}, {x, wt},
      [op, s, need_x, need_w, need_b, backward](const variable_list& g, const variable_list& sv) {
        return conv_backward(op, g[0], sv[0], sv[1], s, need_x, need_w, need_b, backward);
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
  if (!detail::direct_image_loops(input)) {
    return detail::conv2d_unfolded(input, weight, bias,
                                   {n, c_in, h, w, kh, kw, stride.h, stride.w, padding.h,
                                    padding.w, dilation.h, dilation.w, oh, ow},
                                   groups);
  }
  ConvShape s{n, c_in, c_out, groups,
              WindowGeometry{c_in, h, w, kh, kw, stride.h, stride.w, padding.h, padding.w,
                             dilation.h, dilation.w, oh, ow}};
  return run_conv(
      "conv2d", input, weight, bias, s, oh, ow,
      []<typename T>(const T* x, const T* w, const T* b, T* y, const ConvShape& shape) {
        conv2d_forward_kernel<T>(x, w, b, y, shape);
      },
      Conv2dBackward{});
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
  if (!detail::direct_image_loops(input)) {
    return detail::conv_transpose2d_folded(input, weight, bias,
                                           {n, c_out, oh, ow, kh, kw, stride.h, stride.w,
                                            padding.h, padding.w, dilation.h, dilation.w, h, w},
                                           groups);
  }
  ConvShape s{n, c_in, c_out, groups,
              WindowGeometry{c_out, oh, ow, kh, kw, stride.h, stride.w, padding.h, padding.w,
                             dilation.h, dilation.w, h, w}};
  return run_conv(
      "conv_transpose2d", input, weight, bias, s, oh, ow,
      []<typename T>(const T* x, const T* w, const T* b, T* y, const ConvShape& shape) {
        conv_transpose2d_forward_kernel<T>(x, w, b, y, shape);
      },
      ConvTranspose2dBackward{});
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
