"""The program the Python hook's tests record, on the stand-in torch (../README.md).

    train.py train STEPS   a training loop: weights, then per step activations and an SGD step
    train.py loop STEPS    the same loop without an optimizer (steps ended by train_step())
    train.py sleep DIR     a step, then writes DIR/ready and sleeps until killed
    train.py oom           allocates until the device is full; exits at once on the OOM
    train.py ranks STEPS   runs `train STEPS` as ranks 0 and 1 (RANK, WORLD_SIZE) and waits

At the end it prints `allocations N peak_requested B peak_reserved B` as the allocator counted.
"""
import os
import subprocess
import sys
import time

import torch


def train_step(weights):
    acts = [torch.empty(64 << 10) for _ in range(4)]
    scores = torch.empty(1 << 20)
    del scores
    return acts


def train(steps, optimizer=True):
    weights = [torch.empty(256 << 10) for _ in range(8)]
    opt = torch.optim.SGD(weights) if optimizer else None
    for _ in range(steps):
        acts = train_step(weights)
        if opt:
            opt.step()
        del acts
    return weights


def report():
    a = torch.ALLOCATOR
    print(f"allocations {a.allocations} peak_requested {a.peak_requested} peak_reserved {a.peak_reserved}",
          flush=True)


def main():
    mode = sys.argv[1]
    if mode == "train":
        keep = train(int(sys.argv[2]))  # noqa: F841 (live at exit, in the snapshot)
        report()
    elif mode == "loop":
        import programs_steps  # noqa: F401 (the --step-on module)
        keep = [torch.empty(256 << 10) for _ in range(8)]  # noqa: F841
        for _ in range(int(sys.argv[2])):
            acts = programs_steps.train_step()
            del acts
        report()
    elif mode == "sleep":
        keep = train(1)  # noqa: F841
        report()
        with open(os.path.join(sys.argv[2], "ready"), "w"):
            pass
        while True:
            time.sleep(0.1)
    elif mode == "oom":
        held = []
        try:
            while True:
                held.append(torch.empty(3 << 20))
        except torch.cuda.OutOfMemoryError:
            report()
            sys.stdout.flush()
            os._exit(3)  # no exit handlers: only the snapshot written at the OOM is left
    elif mode == "ranks":
        procs = [subprocess.Popen([sys.executable, __file__, "train", sys.argv[2]],
                                  env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r)))
                 for r in range(2)]
        sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
