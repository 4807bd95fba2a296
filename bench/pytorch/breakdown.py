#!/usr/bin/env python3
"""Where PyTorch's training step of the Fashion-MNIST models goes, by kind of work, from
torch.profiler: the self CPU time of every operator, summed into the kinds that
scripts/step-breakdown.sh uses for tensorlib (GEMM, convolution, elementwise, reductions,
pooling, other operators; the optimizer: everything inside its `Optimizer.step` and
`Optimizer.zero_grad` ranges), plus what none of them accounts for (the Python loop,
autograd's engine between operators: "framework"). The step time is taken without the
profiler, the kinds with it. A development aid; nothing in the build needs it.

Prints JSON: {"torch": version, "threads": n, "<model>": {"step_ms": ..., "<kind>_ms": ...}}.
"""
import argparse
import json
import time

import torch
from torch.profiler import ProfilerActivity, profile

from train_step import cnn, mlp, training_step

# aten operator -> kind (by name; the first matching prefix wins).
KINDS = [
    ("gemm", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")),
    ("convolution", ("aten::convolution", "aten::_convolution", "aten::conv2d",
                     "aten::mkldnn_convolution", "aten::convolution_backward",
                     "aten::_slow_conv2d", "aten::thnn_conv2d", "aten::im2col", "aten::col2im")),
    ("pooling", ("aten::max_pool2d", "aten::max_pool2d_with_indices",
                 "aten::max_pool2d_with_indices_backward")),
    ("reductions", ("aten::sum", "aten::mean", "aten::_log_softmax", "aten::nll_loss",
                    "aten::_log_softmax_backward_data", "aten::nll_loss_backward", "aten::max",
                    "aten::amax", "aten::logsumexp")),
    ("elementwise", ("aten::relu", "aten::threshold_backward", "aten::add", "aten::mul",
                     "aten::div", "aten::sub", "aten::sqrt", "aten::where", "aten::clamp",
                     "aten::fill_", "aten::zero_", "aten::copy_")),
]


def kind_of(name):
    for kind, prefixes in KINDS:
        if any(name.startswith(p) for p in prefixes):
            return kind
    return "other_ops" if name.startswith("aten::") else None


def breakdown(model, steps):
    step, _, _, _ = training_step(model)

    for _ in range(5):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    step_ms = (time.perf_counter() - t0) * 1e3 / steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    kinds = {}

    def in_optimizer(e):
        while e is not None:
            if e.name.startswith("Optimizer."):
                return True
            e = e.cpu_parent
        return False

    for e in prof.events():
        if e.name.startswith("Optimizer.") and not in_optimizer(e.cpu_parent):
            kind, ms = "optimizer", e.cpu_time_total
        else:
            kind = kind_of(e.name)
            if kind is None or kind == "optimizer" or in_optimizer(e.cpu_parent):
                continue
            ms = e.self_cpu_time_total
        kinds[kind] = kinds.get(kind, 0.0) + ms / 1e3 / steps
    out = {"step_ms": step_ms}
    out.update({f"{k}_ms": v for k, v in sorted(kinds.items())})
    out["framework_ms"] = max(0.0, step_ms - sum(kinds.values()))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", choices=("mlp", "cnn"), action="append")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    for name, make in (("mlp", mlp), ("cnn", cnn)):
        if not a.model or name in a.model:
            out[name] = breakdown(make(), a.steps)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
