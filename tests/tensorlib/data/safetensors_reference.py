"""Writes reference.safetensors with the reference implementation (the `safetensors` package),
for tests/tensorlib/serialize_test.cpp, which loads it and checks the values below.

Run: /tmp/torchvenv/bin/python tests/tensorlib/data/safetensors_reference.py
(needs torch and safetensors: pip install safetensors)
"""
import os

import torch
from safetensors.torch import save_file

tensors = {
    "f32": torch.tensor([[1.5, -2.0, 3.25], [0.0, 1e-3, -7.0]], dtype=torch.float32),
    "f64": torch.tensor([3.141592653589793, -1e300], dtype=torch.float64),
    "f16": torch.tensor([0.5, -65504.0, 1.0 / 3], dtype=torch.float16),
    "bf16": torch.tensor([1.0, -3.0e38], dtype=torch.bfloat16),
    "i64": torch.tensor([[-(2**62), 7], [0, 2**40]], dtype=torch.int64),
    "i32": torch.tensor([-5, 2**31 - 1], dtype=torch.int32),
    "i16": torch.tensor([-32768, 1234], dtype=torch.int16),
    "i8": torch.tensor([-128, 127, 3], dtype=torch.int8),
    "u8": torch.tensor([0, 255], dtype=torch.uint8),
    "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5, dtype=torch.float32),
    "empty": torch.zeros((0, 3), dtype=torch.float32),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.safetensors")
save_file(tensors, out, metadata={"source": "safetensors_reference.py"})
print(out, os.path.getsize(out), "bytes")
for name, t in tensors.items():
    print(name, t.dtype, list(t.shape), t.flatten().tolist())
