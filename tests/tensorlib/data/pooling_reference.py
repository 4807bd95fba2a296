#!/usr/bin/env python3
"""Expected outputs of max_pool2d (with indices), avg_pool2d, adaptive_avg_pool2d and
interpolate for tests/tensorlib/pooling_test.cpp.

Run with a Python that has PyTorch:
    python tests/tensorlib/data/pooling_reference.py > tests/tensorlib/data/pooling_reference.h
Inputs are deterministic (pattern() below, mirrored in the test), so no RNG has to agree.
"""
import torch
import torch.nn.functional as F


def pattern(shape, seed):
    n = 1
    for s in shape:
        n *= s
    vals = [((i * 37 + seed * 17) % 101) / 50.0 - 1.0 for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).reshape(shape)


def case(name, op, shape, kernel=(0, 0), stride=(0, 0), padding=(0, 0), dilation=(1, 1),
         ceil_mode=False, count_include_pad=True, divisor_override=0, size=(0, 0),
         scale=(0.0, 0.0), mode="", align_corners=-1, recompute=False):
    return dict(name=name, op=op, shape=shape, kernel=kernel, stride=stride, padding=padding,
                dilation=dilation, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                divisor_override=divisor_override, size=size, scale=scale, mode=mode,
                align_corners=align_corners, recompute=recompute)


CASES = [
    case("max_k2", "max_pool2d", [2, 3, 6, 6], (2, 2), (2, 2)),
    case("max_k3_s2_p1", "max_pool2d", [1, 2, 7, 8], (3, 3), (2, 2), (1, 1)),
    case("max_ceil", "max_pool2d", [1, 2, 8, 7], (3, 3), (2, 2), ceil_mode=True),
    case("max_ceil_padding_drops_last", "max_pool2d", [1, 1, 5, 5], (2, 2), (2, 2), (1, 1),
         ceil_mode=True),
    case("max_dilation", "max_pool2d", [1, 1, 9, 8], (3, 2), (1, 2), (1, 1), (2, 2)),
    case("max_unbatched", "max_pool2d", [2, 5, 5], (2, 2), (1, 1)),
    case("avg_k2", "avg_pool2d", [2, 3, 6, 6], (2, 2), (2, 2)),
    case("avg_pad_include", "avg_pool2d", [1, 2, 7, 8], (3, 3), (2, 2), (1, 1)),
    case("avg_pad_exclude", "avg_pool2d", [1, 2, 7, 8], (3, 3), (2, 2), (1, 1),
         count_include_pad=False),
    case("avg_ceil_include", "avg_pool2d", [1, 2, 8, 7], (3, 3), (2, 2), (1, 1), ceil_mode=True),
    case("avg_ceil_exclude", "avg_pool2d", [1, 2, 8, 7], (3, 3), (2, 2), (1, 1), ceil_mode=True,
         count_include_pad=False),
    case("avg_ceil_past_input", "avg_pool2d", [1, 1, 5, 5], (2, 2), (2, 2), ceil_mode=True),
    case("avg_divisor_override", "avg_pool2d", [1, 2, 4, 5], (2, 3), (1, 1), (1, 1),
         divisor_override=3),
    case("avg_unbatched", "avg_pool2d", [2, 5, 4], (2, 2), (1, 2)),
    case("adaptive_down", "adaptive_avg_pool2d", [2, 3, 7, 5], size=(3, 2)),
    case("adaptive_identity", "adaptive_avg_pool2d", [1, 2, 7, 5], size=(7, 5)),
    case("adaptive_up", "adaptive_avg_pool2d", [1, 2, 3, 5], size=(4, 8)),
    case("adaptive_global", "adaptive_avg_pool2d", [2, 3, 4, 5], size=(1, 1)),
    case("adaptive_unbatched", "adaptive_avg_pool2d", [2, 6, 6], size=(4, 3)),
    case("nearest_size", "interpolate", [1, 2, 4, 3], size=(7, 5), mode="nearest"),
    case("nearest_scale2", "interpolate", [2, 1, 3, 4], scale=(2.0, 2.0), mode="nearest"),
    case("nearest_scale_1_7", "interpolate", [1, 1, 5, 6], scale=(1.7, 1.3), mode="nearest"),
    case("nearest_scale_1_7_recompute", "interpolate", [1, 1, 5, 6], scale=(1.7, 1.3),
         mode="nearest", recompute=True),
    case("nearest_down", "interpolate", [1, 2, 5, 7], size=(2, 3), mode="nearest"),
    case("bilinear_size", "interpolate", [1, 2, 4, 3], size=(7, 5), mode="bilinear",
         align_corners=0),
    case("bilinear_size_align", "interpolate", [1, 2, 4, 3], size=(7, 5), mode="bilinear",
         align_corners=1),
    case("bilinear_scale_2_5", "interpolate", [1, 1, 3, 4], scale=(2.5, 2.5), mode="bilinear"),
    case("bilinear_down", "interpolate", [1, 2, 6, 5], size=(3, 2), mode="bilinear",
         align_corners=0),
    case("bilinear_down_align", "interpolate", [1, 2, 6, 5], size=(3, 2), mode="bilinear",
         align_corners=1),
    case("bilinear_to_one_align", "interpolate", [1, 1, 4, 5], size=(1, 3), mode="bilinear",
         align_corners=1),
]


def fmt(vals, per_line=0, spec="%.17g"):
    items = [spec % v for v in vals]
    if not per_line:
        return "{" + ", ".join(items) + "}"
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "{" + ",\n      ".join(lines) + "}"


def run(c):
    x = pattern(c["shape"], 1)
    idx = None
    if c["op"] == "max_pool2d":
        y, idx = F.max_pool2d(x, c["kernel"], c["stride"], c["padding"], c["dilation"],
                              c["ceil_mode"], return_indices=True)
    elif c["op"] == "avg_pool2d":
        y = F.avg_pool2d(x, c["kernel"], c["stride"], c["padding"], c["ceil_mode"],
                         c["count_include_pad"], c["divisor_override"] or None)
    elif c["op"] == "adaptive_avg_pool2d":
        y = F.adaptive_avg_pool2d(x, c["size"])
    else:
        size = c["size"] if c["size"][0] else None
        scale = c["scale"] if c["scale"][0] else None
        ac = None if c["align_corners"] < 0 else bool(c["align_corners"])
        y = F.interpolate(x, size=size, scale_factor=scale, mode=c["mode"], align_corners=ac,
                          recompute_scale_factor=c["recompute"] or None)
    return y, idx


def main():
    print("// Generated by tests/tensorlib/data/pooling_reference.py with PyTorch %s; do not edit."
          % torch.__version__)
    print("// clang-format off")
    print("#pragma once\n\n#include <cstdint>\n#include <vector>\n\nnamespace pooling_reference {\n")
    print("struct Case {\n  const char* name;\n  const char* op;\n  std::vector<int64_t> input;\n"
          "  int64_t kernel[2], stride[2], padding[2], dilation[2];\n"
          "  bool ceil_mode, count_include_pad;\n  int64_t divisor_override;  // 0: none\n"
          "  int64_t size[2];    // adaptive or interpolate output size (0: none)\n"
          "  double scale[2];    // interpolate scale_factor (0: none)\n"
          "  const char* mode;\n  int align_corners;  // -1: not given\n"
          "  bool recompute_scale_factor;\n"
          "  std::vector<int64_t> out_shape;\n  std::vector<double> out;\n"
          "  std::vector<int64_t> indices;  // max_pool2d only\n};\n")
    print("inline const std::vector<Case> kCases = {")
    for c in CASES:
        y, idx = run(c)
        b = lambda v: "true" if v else "false"
        print('    {"%s", "%s", %s, {%d, %d}, {%d, %d}, {%d, %d}, {%d, %d}, %s, %s, %d, {%d, %d},\n'
              '     {%r, %r}, "%s", %d, %s, %s,\n     %s,\n     %s},'
              % (c["name"], c["op"], fmt(c["shape"]), *c["kernel"], *c["stride"], *c["padding"],
                 *c["dilation"], b(c["ceil_mode"]), b(c["count_include_pad"]),
                 c["divisor_override"], *c["size"], *c["scale"], c["mode"], c["align_corners"],
                 b(c["recompute"]), fmt(list(y.shape)), fmt(y.flatten().tolist(), 4),
                 fmt(idx.flatten().tolist(), 12, "%d") if idx is not None else "{}"))
    print("};\n\n}  // namespace pooling_reference")


if __name__ == "__main__":
    main()
