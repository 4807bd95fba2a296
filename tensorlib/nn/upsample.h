// Resizing images (NCHW; float32, float64, and on the CPU float16 and bfloat16) as
// torch.nn.functional.interpolate and torch.nn.Upsample, modes "nearest" and "bilinear", with
// PyTorch's index formulas.
#pragma once

#include <optional>
#include <string>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"
#include "tensorlib/nn/pair.h"

namespace tl::nn {

/// interpolate's arguments (exactly one of size and scale_factor), chained as libtorch's:
/// InterpolateOptions().scale_factor(2).mode("bilinear").align_corners(true).
struct InterpolateOptions {
  InterpolateOptions() {}  // user-provided: `{4, 6}` must mean a size, never these options
  InterpolateOptions& size(IntPair v) { return size_ = v, *this; }
  InterpolateOptions& scale_factor(DoublePair v) { return scale_factor_ = v, *this; }
  InterpolateOptions& mode(std::string v) { return mode_ = std::move(v), *this; }
  InterpolateOptions& align_corners(bool v) { return align_corners_ = v, *this; }
  InterpolateOptions& recompute_scale_factor(bool v) { return recompute_scale_factor_ = v, *this; }

  std::optional<IntPair> size_;
  std::optional<DoublePair> scale_factor_;
  std::string mode_ = "nearest";
  std::optional<bool> align_corners_;
  std::optional<bool> recompute_scale_factor_;
};
using UpsampleOptions = InterpolateOptions;

namespace functional {

/// Resizes the H and W dims of a 4-D input to `size`, or to floor(in * scale_factor).
/// "nearest": output i reads input floor(i * scale) (scale = 1 / scale_factor when given and
/// not recomputed, else in / out, in float as PyTorch). "bilinear": source coordinate
/// (i + 0.5) * scale - 0.5 clamped at 0 (align_corners false, the default) or
/// i * (in - 1) / (out - 1) (align_corners true), blended from its two neighbours per dim.
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);
Tensor interpolate(const Tensor& input, std::optional<IntPair> size,
                   std::optional<DoublePair> scale_factor = std::nullopt,
                   const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt,
                   std::optional<bool> recompute_scale_factor = std::nullopt);

}  // namespace functional

/// torch.nn.Upsample (no parameters): Upsample(UpsampleOptions().scale_factor(2)).
class Upsample : public Module {
 public:
  explicit Upsample(const UpsampleOptions& options);
  Tensor forward(const Tensor& x) override;

  UpsampleOptions options;
};

}  // namespace tl::nn
