"""A small PyTorch training run for gpu_check.sh, recorded by `tidemark record` and run plain.

Trains a small conv net on random data on the GPU, inside NVTX ranges, with a sync (loss.item())
every 10 steps, a large temporary half-way (so reserved memory has a clear peak) and
empty_cache() at the end (segment frees). Prints one JSON line: what torch.cuda says about
its memory, the training loop's wall time, and whether expandable segments were on.
"""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--snapshot", help="also write a memory snapshot here")
    args = p.parse_args()

    dev = torch.device("cuda")
    torch.manual_seed(0)
    if args.snapshot:
        torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_host = torch.randn(64, 3, 64, 64).pin_memory()
    y_host = torch.randint(0, 10, (64,)).pin_memory()

    def step(i):
        torch.cuda.nvtx.range_push("step")
        x = x_host.to(dev, non_blocking=True)
        y = y_host.to(dev, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i == args.steps // 2:
            big = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
            big.fill_(1)
            del big
        value = loss.item() if i % 10 == 0 else None
        torch.cuda.nvtx.range_pop()
        return value

    for i in range(5):  # warm-up: cuDNN autotuning, the allocator's first segments
        step(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0
    max_reserved = torch.cuda.max_memory_reserved()
    max_allocated = torch.cuda.max_memory_allocated()
    if args.snapshot:
        torch.cuda.memory._dump_snapshot(args.snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    print(json.dumps({
        "max_reserved": max_reserved,
        "max_allocated": max_allocated,
        "loop_s": loop_s,
        "steps": args.steps,
        "expandable": "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
