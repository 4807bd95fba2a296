#!/usr/bin/env python3
"""PyTorch's CPU time for the Fashion-MNIST CNN of bench/conv_bench.cpp (batch 64, 2 threads):
one training step (forward, cross entropy, backward, SGD), and each conv layer's forward and
forward+backward. Prints milliseconds per iteration (median of repetitions)."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)


def median_ms(fn, reps=7, inner=10):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) * 1000 / inner)
    times.sort()
    return times[len(times) // 2]


model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(64, 1, 28, 28)
y = torch.randint(0, 10, (64,))


def step():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


print("cnn_step_ms %.3f" % median_ms(step))
for name, shape, conv in [("conv1", (64, 1, 28, 28), nn.Conv2d(1, 32, 3, padding=1)),
                          ("conv2", (64, 32, 14, 14), nn.Conv2d(32, 64, 3, padding=1))]:
    inp = torch.randn(*shape, requires_grad=(name == "conv2"))
    with torch.no_grad():
        print("%s_forward_ms %.3f" % (name, median_ms(lambda: conv(inp))))

    def fb():
        conv.zero_grad()
        conv(inp).sum().backward()
    print("%s_forward_backward_ms %.3f" % (name, median_ms(fb)))
