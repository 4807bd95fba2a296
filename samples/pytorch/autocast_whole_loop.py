"""Pitfall: an autocast region around the whole training loop.

`torch.autocast` caches the 16-bit copy it makes of each float32 weight for as long as the
region lasts. Opened around the whole loop, the region never ends: the first forward casts the
weights, and every later forward computes with those first copies while the optimizer updates
the float32 weights in place -- the model trains with stale weights (a correctness bug), and
the copies stay allocated under every step. PyTorch's documentation asks for the region around
the forward and the loss only. `--fixed` does that: each forward makes fresh copies, freed when
its backward is done.
"""
import contextlib

import torch

import tiny_gpt as common


def main():
    args = common.parse(__doc__.splitlines()[0])
    model, optimizer = common.setup(args)
    bf16 = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    whole = contextlib.nullcontext() if args.fixed else bf16()  # BUG: around the whole loop
    each = bf16 if args.fixed else contextlib.nullcontext
    with whole:
        for i in range(args.steps + 1):
            if i == args.steps:
                common.record()
            optimizer.zero_grad()
            x, y = common.batch(args)
            with each():
                loss = common.loss_of(model, x, y)
            if i == args.steps and args.window == "forward":
                break
            loss.backward()
            optimizer.step()
    common.dump(args)


if __name__ == "__main__":
    main()
