"""Reference learning rates for tests/tensorlib/scheduler_test.cpp, from PyTorch's schedulers
(which compute them recursively; tensorlib uses the closed forms).

Run: /tmp/torchvenv/bin/python tests/tensorlib/data/scheduler_reference.py
"""
import torch


def rates(make, steps=20, lr=0.1):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make(opt)
    out = [sched.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def show(name, values):
    print(f"// {name}")
    print("{" + ", ".join(f"{v:.17g}" for v in values) + "}")


show("StepLR(step_size=3, gamma=0.5), lr 0.1",
     rates(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)))
show("CosineAnnealingLR(T_max=8, eta_min=0.001), lr 0.1",
     rates(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=0.001)))
show("CosineAnnealingLR(T_max=5), lr 0.05",
     rates(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5), lr=0.05))
