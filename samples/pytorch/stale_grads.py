"""Pitfall: the last step's gradients live through the next forward.

`optimizer.zero_grad(set_to_none=False)` zeroes the gradients in place and never frees them, so
every forward runs with one gradient per parameter allocated beside the parameters and AdamW's
two moments: four equal groups of parameter-sized blocks where three would do. The forward's
activations come on top of them. `--fixed` calls `zero_grad()` (set_to_none=True, the default)
at the start of each step: the gradients are freed before the forward, and backward makes them
again.
"""

import tiny_gpt as common


def step(args, model, optimizer, window=False):
    if args.fixed:
        optimizer.zero_grad()  # frees the gradients before the forward
    x, y = common.batch(args)
    loss = common.loss_of(model, x, y)
    if window and args.window == "forward":
        return True  # the snapshot is dumped between the forward and backward
    loss.backward()
    optimizer.step()
    if not args.fixed:
        optimizer.zero_grad(set_to_none=False)  # BUG: zeroed in place, never freed
    return False


def main():
    args = common.parse(__doc__.splitlines()[0])
    model, optimizer = common.setup(args)
    for _ in range(args.steps):
        step(args, model, optimizer)
    common.record()
    step(args, model, optimizer, window=True)
    common.dump(args)


if __name__ == "__main__":
    main()
