"""Reference values for tests/tensorlib/nn_layers_test.cpp, from PyTorch (float64).

Run: /tmp/torchvenv/bin/python tests/tensorlib/data/nn_layers_reference.py
Inputs are deterministic: x_k = sin(0.37 * i + k) * (1 + 0.1 * k) + 0.05 * k over the flat
index i, reshaped; the test builds the same tensors with tensorlib.
"""
import math

import torch

torch.set_default_dtype(torch.float64)


def x(k, shape):
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    return (torch.sin(0.37 * i + k) * (1 + 0.1 * k) + 0.05 * k).reshape(shape)


def fmt(t):
    return ", ".join(f"{v:.17g}" for v in t.flatten().tolist())


for name, mod, shape in [
    ("bn2d", torch.nn.BatchNorm2d(3), (4, 3, 2, 2)),
    ("bn1d", torch.nn.BatchNorm1d(3), (5, 3)),
    ("bn1d_ncl", torch.nn.BatchNorm1d(3, momentum=None), (2, 3, 4)),
]:
    with torch.no_grad():
        mod.weight.copy_(torch.tensor([1.5, 0.5, -1.0]))
        mod.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    mod.train()
    train_out = None
    for k in range(3):
        y = mod(x(k, shape))
        if k == 0:
            train_out = y
    mod.eval()
    eval_out = mod(x(3, shape))
    print(f"// {name}: train output at step 0 (first 6)")
    print("{" + fmt(train_out.flatten()[:6]) + "}")
    print(f"// {name}: running_mean, running_var, num_batches_tracked")
    print("{" + fmt(mod.running_mean) + "}")
    print("{" + fmt(mod.running_var) + "}")
    print(int(mod.num_batches_tracked))
    print(f"// {name}: eval output on x_3 (first 6)")
    print("{" + fmt(eval_out.flatten()[:6]) + "}")

ln = torch.nn.LayerNorm([2, 3])
with torch.no_grad():
    ln.weight.copy_(torch.tensor([[1.0, 2.0, 0.5], [-1.0, 1.5, 0.25]]))
    ln.bias.copy_(torch.tensor([[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]]))
print("// layer_norm [4, 2, 3] over [2, 3], first 8")
print("{" + fmt(ln(x(0, (4, 2, 3))).flatten()[:8]) + "}")

logits = torch.tensor([[-100.0, -3.0, 0.0], [0.5, 2.0, 100.0]])
target = torch.tensor([[0.0, 1.0, 1.0], [0.25, 0.0, 1.0]])
weight = torch.tensor([1.0, 2.0, 0.5])
pos_weight = torch.tensor([3.0, 0.5, 2.0])
F = torch.nn.functional
print("// bce plain, weighted, pos_weighted, both")
print(f"{F.binary_cross_entropy_with_logits(logits, target).item():.17g}")
print(f"{F.binary_cross_entropy_with_logits(logits, target, weight=weight).item():.17g}")
print(f"{F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight).item():.17g}")
l = F.binary_cross_entropy_with_logits(logits.requires_grad_(), target, weight=weight,
                                       pos_weight=pos_weight)
print(f"{l.item():.17g}")
l.backward()
print("// its gradient w.r.t. the logits")
print("{" + fmt(logits.grad) + "}")
