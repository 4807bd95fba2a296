#!/usr/bin/env python3
"""PyTorch's figures for bench/gpu/gpu_ops_bench.cpp on the same GPU, written as JSON:
the Fashion-MNIST MLP and CNN training steps (samples/fashion_models.h; Adam, batch 64) and an
allocation+free pair of 1 MiB through the caching allocator. Exits 77 when torch or a GPU is
missing.
    bench/gpu/torch_baseline.py OUT.json
"""
import json
import sys

try:
    import torch
except ImportError:
    print("torch_baseline.py: PyTorch not installed, no baseline")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_baseline.py: no CUDA device, no baseline")
    sys.exit(77)


def time_us(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return 1000.0 * start.elapsed_time(end) / reps


torch.manual_seed(0)
dev = torch.device("cuda:0")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False  # tensorlib computes float32 convolutions in float32 too
nn = torch.nn
mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
cnn = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                    nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
x = torch.randn(64, 1, 28, 28, device=dev)
y = torch.randint(0, 10, (64,), device=dev)


def step_us(model, reps):
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return time_us(step, reps)


def pair():
    t = torch.empty(256 * 1024, device=dev)
    del t


out = {"torch": torch.__version__, "mlp_step_us": step_us(mlp, 200),
       "cnn_step_us": step_us(cnn, 50), "alloc_free_pair_us": time_us(pair, 10000)}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
print(json.dumps(out))
