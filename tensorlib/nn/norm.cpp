#include "tensorlib/nn/norm.h"

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"

namespace tl::nn::functional {

using autograd::variable_list;

namespace {
bool needs(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

// [1, C, 1, ...]: a per-channel tensor broadcast against an input of `dim` dimensions.
std::vector<int64_t> channel_shape(int64_t dim, int64_t channels) {
  std::vector<int64_t> s(static_cast<size_t>(dim), 1);
  s[1] = channels;
  return s;
}

void check_param(const Tensor& t, int64_t channels, const char* what) {
  if (!t.defined()) return;
  TL_CHECK(t.dim() == 1 && t.size(0) == channels, "batch_norm: expected ", what, " of shape [",
           channels, "], got ", t.sizes());
}
}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  TL_CHECK(input.dim() >= 2,
           "batch_norm: expected an input of at least 2 dimensions [N, C, ...], "
           "got shape ",
           input.sizes());
  TL_CHECK(input.is_floating_point(), "batch_norm: expected a floating point input, got ",
           input.dtype());
  const int64_t channels = input.size(1);
  check_param(running_mean, channels, "running_mean");
  check_param(running_var, channels, "running_var");
  check_param(weight, channels, "weight");
  check_param(bias, channels, "bias");
  TL_CHECK(training || (running_mean.defined() && running_var.defined()),
           "batch_norm: running_mean and running_var must be defined in evaluation mode");
  TL_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: running_mean and running_var must both be given or both be undefined");

  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  const int64_t n = channels == 0 ? 0 : input.numel() / channels;
  const std::vector<int64_t> cshape = channel_shape(input.dim(), channels);

  Tensor mean, invstd;
  Tensor out = autograd::forward_no_grad([&] {
    if (training) {
      TL_CHECK(n > 1, "Expected more than 1 value per channel when training, got input size ",
               input.sizes());
      mean = input.mean(dims);
      Tensor var = input.var(dims, /*unbiased=*/false);
      if (running_mean.defined()) {
        const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        Tensor rm = running_mean, rv = running_var;  // handles: the update is in place
        rm.mul_(1 - momentum).add_(mean.to(rm.dtype()), momentum);
        rv.mul_(1 - momentum).add_((var * unbias).to(rv.dtype()), momentum);
      }
      invstd = var.add_(eps).rsqrt_();
    } else {
      mean = running_mean.to(input.dtype(), /*copy=*/true);
      invstd = running_var.to(input.dtype()).add(eps).rsqrt_();
    }
    // y = x * scale + shift with scale = w / std and shift = b - mean * scale: one pass over x.
    Tensor scale = weight.defined() ? invstd * weight : invstd;
    Tensor shift = mean * scale;
    shift = bias.defined() ? bias - shift : shift.neg_();
    Tensor y = input * scale.view(cshape);
    y.add_(shift.view(cshape));
    return y;
  });

  const bool input_rg = needs(input), weight_rg = needs(weight), bias_rg = needs(bias);
  autograd::record(
      out, "NativeBatchNorm", {&input, &weight, &bias}, {input, weight, mean, invstd},
      [=](const variable_list& g, const variable_list& s) {
        const Tensor& x = s[0];
        const Tensor& w = s[1];
        const Tensor& mu = s[2];
        const Tensor& is = s[3];
        Tensor gi, gw, gb;
        Tensor xhat = (input_rg && training) || weight_rg ? (x - mu.view(cshape)) * is.view(cshape)
                                                          : Tensor();
        Tensor sum_g = (input_rg && training) || bias_rg ? g[0].sum(dims) : Tensor();
        Tensor sum_gx = (input_rg && training) || weight_rg ? (g[0] * xhat).sum(dims) : Tensor();
        if (weight_rg) gw = sum_gx;
        if (bias_rg) gb = sum_g;
        if (input_rg) {
          Tensor scale = w.defined() ? is * w : is;
          if (training) {
            // dx = w / std * (g - mean(g) - x_hat * mean(g * x_hat)), the means over
            // each channel.
            const double inv_n = 1.0 / static_cast<double>(n);
            xhat.mul_((sum_gx * inv_n).view(cshape));
            gi = g[0] - xhat;
            gi.sub_((sum_g * inv_n).view(cshape)).mul_(scale.view(cshape));
          } else {
            gi = g[0] * scale.view(cshape);
          }
        }
        return variable_list{gi, gw, gb};
      });
  return out;
}

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TL_CHECK(k >= 1, "layer_norm: normalized_shape must have at least one dimension");
  TL_CHECK(input.is_floating_point(), "layer_norm: expected a floating point input, got ",
           input.dtype());
  bool ok = input.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = input.size(input.dim() - k + i) == normalized_shape[i];
  TL_CHECK(ok, "Given normalized_shape=", normalized_shape,
           ", expected input with shape [*, ...normalized_shape], but got input of size ",
           input.sizes());
  for (const Tensor* p : {&weight, &bias}) {
    TL_CHECK(!p->defined() || p->sizes() == normalized_shape, "layer_norm: expected ",
             p == &weight ? "weight" : "bias", " of shape ", normalized_shape, ", got ",
             p->sizes());
  }
  std::vector<int64_t> norm_dims, lead_dims;
  for (int64_t d = 0; d < input.dim(); ++d)
    (d < input.dim() - k ? lead_dims : norm_dims).push_back(d);
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;

  Tensor mean, invstd;
  Tensor out = autograd::forward_no_grad([&] {
    mean = input.mean(norm_dims, /*keepdim=*/true);
    invstd = input.var(norm_dims, /*unbiased=*/false, /*keepdim=*/true).add_(eps).rsqrt_();
    Tensor y = (input - mean).mul_(invstd);
    if (weight.defined()) y.mul_(weight);
    if (bias.defined()) y.add_(bias);
    return y;
  });

  const bool input_rg = needs(input), weight_rg = needs(weight), bias_rg = needs(bias);
  // Sums over the leading dimensions, down to normalized_shape.
  auto sum_lead = [lead_dims](const Tensor& t) { return lead_dims.empty() ? t : t.sum(lead_dims); };
  autograd::record(out, "NativeLayerNorm", {&input, &weight, &bias}, {input, weight, mean, invstd},
                   [=](const variable_list& g, const variable_list& s) {
                     const Tensor& x = s[0];
                     const Tensor& w = s[1];
                     Tensor xhat = (x - s[2]) * s[3];
                     Tensor gi, gw, gb;
                     if (weight_rg) gw = sum_lead(g[0] * xhat);
                     if (bias_rg) gb = sum_lead(g[0]);
                     if (input_rg) {
                       // dx = (gx - mean(gx) - x_hat * mean(gx * x_hat)) / std, gx = g * w, means
                       // over the normalised dimensions.
                       Tensor gx = w.defined() ? g[0] * w : g[0];
                       const double inv_m = 1.0 / static_cast<double>(m);
                       Tensor mean_gx = gx.sum(norm_dims, true).mul_(inv_m);
                       Tensor mean_gxx = (gx * xhat).sum(norm_dims, true).mul_(inv_m);
                       gi = gx - mean_gx;
                       gi.sub_(xhat.mul_(mean_gxx)).mul_(s[3]);
                     }
                     return variable_list{gi, gw, gb};
                   });
  return out;
}

}  // namespace tl::nn::functional

namespace tl::nn {

BatchNorm::BatchNorm(const char* kind, int64_t features, double eps_, std::optional<double> mom,
                     bool affine_, bool track)
    : Module(kind),
      num_features(features),
      eps(eps_),
      momentum(mom),
      affine(affine_),
      track_running_stats(track),
      weight(register_parameter("weight", affine_ ? tl::ones({features}) : Tensor())),
      bias(register_parameter("bias", affine_ ? tl::zeros({features}) : Tensor())),
      running_mean(register_buffer("running_mean", track ? tl::zeros({features}) : Tensor())),
      running_var(register_buffer("running_var", track ? tl::ones({features}) : Tensor())),
      num_batches_tracked(register_buffer(
          "num_batches_tracked", track ? tl::zeros(std::vector<int64_t>{}, kInt64) : Tensor())) {
  TL_CHECK(features > 0, kind, ": num_features must be positive, got ", features);
}

// As torch.nn.modules.batchnorm._BatchNorm.forward.
Tensor BatchNorm::forward(const Tensor& x) {
  check_input_dim(x);
  double factor = momentum.value_or(0.0);
  if (training_ && track_running_stats) {
    num_batches_tracked.add_(1);
    if (!momentum) factor = 1.0 / num_batches_tracked.item<double>();
  }
  const bool use_batch_stats = training_ || !running_mean.defined();
  // Statistics are updated in training only when tracked; in evaluation they are used when
  // tracked, otherwise the batch's own statistics are.
  const bool pass_stats = !training_ || track_running_stats;
  return functional::batch_norm(x, pass_stats ? running_mean : Tensor(),
                                pass_stats ? running_var : Tensor(), weight, bias, use_batch_stats,
                                factor, eps);
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  TL_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ", x.dim(),
           "D input)");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  TL_CHECK(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input)");
}

namespace {
std::vector<int64_t> checked_shape(std::vector<int64_t> s) {
  TL_CHECK(!s.empty(), "LayerNorm: normalized_shape must have at least one dimension");
  return s;
}
}  // namespace

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps_, bool elementwise_affine,
                     bool with_bias)
    : Module("layernorm"),
      normalized_shape(checked_shape(std::move(shape))),
      eps(eps_),
      weight(
          register_parameter("weight", elementwise_affine ? tl::ones(normalized_shape) : Tensor())),
      bias(register_parameter(
          "bias", elementwise_affine && with_bias ? tl::zeros(normalized_shape) : Tensor())) {}

Tensor LayerNorm::forward(const Tensor& x) {
  return functional::layer_norm(x, normalized_shape, weight, bias, eps);
}

}  // namespace tl::nn
