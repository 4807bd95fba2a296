#!/usr/bin/env python3
"""PyTorch's time for one training step of the Fashion-MNIST models of
samples/fashion_models.h (batch 64, Adam 1e-3, cross entropy), on the CPU with a given thread
count. A development aid for scripts/compare-pytorch.sh; nothing in the build needs it.

Prints JSON: {"torch": version, "threads": n, "mlp_step_ms": ..., "cnn_step_ms": ...} (with
--model, only that model's time). With --phases, each model's step split as
bench/train_step_bench's BM_*Phase benchmarks split it: "mlp_phases_ms": {"zero_grad": ...,
"forward": ..., "backward": ..., "optimizer": ...}, each the median over the repetitions of the
phase's mean time.
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def training_step(model):
    """The step every script here times: zero_grad, forward, cross entropy, backward, Adam, on
    a fixed synthetic batch of the dataset's shape (as bench/train_step_bench does)."""
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step, opt, x, y


def step_ms(model, seconds, repetitions):
    step, _, _, _ = training_step(model)
    for _ in range(5):
        step()
    results = []
    for _ in range(repetitions):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step()
            n += 1
        results.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(results)


PHASES = ("zero_grad", "forward", "backward", "optimizer")


def phases_ms(model, seconds, repetitions):
    _, opt, x, y = training_step(model)
    clock = time.perf_counter
    runs = {p: [] for p in PHASES}
    for rep in range(repetitions + 1):  # the first is a warm-up
        sums, n, start = [0.0] * 4, 0, clock()
        while clock() - start < seconds:
            t0 = clock()
            opt.zero_grad()
            t1 = clock()
            loss = nn.functional.cross_entropy(model(x), y)
            t2 = clock()
            loss.backward()
            t3 = clock()
            opt.step()
            t4 = clock()
            for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                sums[i] += d
            n += 1
        if rep:
            for i, p in enumerate(PHASES):
                runs[p].append(sums[i] / n * 1e3)
    return {p: statistics.median(v) for p, v in runs.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=1.0, help="per repetition")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--model", choices=("mlp", "cnn"), action="append",
                   help="time only this model (repeatable; default both)")
    p.add_argument("--phases", action="store_true",
                   help="split each step into zero_grad, forward, backward and optimizer")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    for name, make in (("mlp", mlp), ("cnn", cnn)):
        if not a.model or name in a.model:
            out[f"{name}_step_ms"] = step_ms(make(), a.seconds, a.repetitions)
            if a.phases:
                out[f"{name}_phases_ms"] = phases_ms(make(), a.seconds, a.repetitions)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
