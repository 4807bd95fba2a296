#!/usr/bin/env python3
"""PyTorch's CPU time for the Fashion-MNIST CNN of bench/conv_bench.cpp (batch 64, 2 threads):
one training step (forward, cross entropy, backward, SGD), and each conv layer's forward and
forward+backward. Prints milliseconds per iteration, the least of several repetitions (a
busy neighbour only ever adds time); `--threads N` (default 2) and `--cpu` (process CPU time
instead of wall time, the fairer figure on a loaded machine) as in bench/conv_bench.cpp."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--cpu", action="store_true")
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(0)
clock = time.process_time if args.cpu else time.perf_counter


def best_ms(fn, reps=7, inner=10):
    fn()
    times = []
    for _ in range(reps):
        t0 = clock()
        for _ in range(inner):
            fn()
        times.append((clock() - t0) * 1000 / inner)
    return min(times)


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


print("cnn_step_ms %.3f" % best_ms(step))
for name, shape, conv in [("conv1", (64, 1, 28, 28), nn.Conv2d(1, 32, 3, padding=1)),
                          ("conv2", (64, 32, 14, 14), nn.Conv2d(32, 64, 3, padding=1))]:
    inp = torch.randn(*shape, requires_grad=(name == "conv2"))
    with torch.no_grad():
        print("%s_forward_ms %.3f" % (name, best_ms(lambda: conv(inp))))

    def fb():
        conv.zero_grad()
        conv(inp).sum().backward()
    print("%s_forward_backward_ms %.3f" % (name, best_ms(fb)))
