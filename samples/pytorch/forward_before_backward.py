"""Healthy: a training step's forward, recorded before its backward.

The program trains correctly (zero_grad at the start of each step, the graph used by backward);
its snapshot is dumped between the forward and `loss.backward()`, as a profiler stopped early
would. The window holds a forward that saves activations and no backward, yet nothing is wrong:
the parameters' AdamW moments live at the window's start say the program trains, and the
backward comes after the snapshot. No diagnosis should advise no_grad here. (`--fixed` is
accepted and changes nothing.)
"""
import torch

import tiny_gpt as common


def main():
    args = common.parse(__doc__.splitlines()[0])
    args.window = "forward"
    model, optimizer = common.setup(args)
    for _ in range(args.steps):
        common.train_step(args, model, optimizer)
    optimizer.zero_grad()
    common.record()
    x, y = common.batch(args)
    loss = common.loss_of(model, x, y)
    common.dump(args)
    loss.backward()
    optimizer.step()
    print(f"peak allocated {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
