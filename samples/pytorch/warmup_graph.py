"""Pitfall: a warm-up forward's graph kept alive through training.

A warm-up pass (to trigger lazy initialisation, autotuning or a first compile) runs the model
with grad mode on and keeps its output. Nothing calls backward on it, and as long as the output
is referenced every tensor its forward saved for backward stays allocated: a whole forward's
activations sit under every later step. `--fixed` runs the warm-up under `torch.no_grad()`,
which saves nothing.
"""
import torch

import tiny_gpt as common


def main():
    args = common.parse(__doc__.splitlines()[0])
    model, optimizer = common.setup(args)
    x, _ = common.batch(args)
    if args.fixed:
        with torch.no_grad():
            warm = model(x)
    else:
        warm = model(x)  # BUG: grad mode on, and `warm` keeps the graph alive
    print(f"warm-up logits {tuple(warm.shape)}")
    for _ in range(args.steps):
        common.train_step(args, model, optimizer)
    common.record()
    optimizer.zero_grad()
    x, y = common.batch(args)
    loss = common.loss_of(model, x, y)
    if args.window == "step":
        loss.backward()
        optimizer.step()
    common.dump(args)


if __name__ == "__main__":
    main()
