"""The model and the command line the PyTorch pitfall programs share: a small GPT-style
transformer (untied embedding and head, pre-norm blocks), trained with AdamW on random tokens.

Each program runs a few warm-up steps, then records the allocator's history for one window
(`torch.cuda.memory._record_memory_history`) and writes PyTorch's snapshot of it
(`_dump_snapshot`), as the programs users profile do. Run on a GPU, or without one under
`tidemark estimate -- python PROGRAM.py`.

  --fixed          run the program with its pitfall fixed
  --snapshot PATH  where the window's snapshot goes (default: none is written)
  --window KIND    what the window holds: `step` (one training step) or `forward` (a step's
                   forward, dumped before its backward)
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=8192, d=512, layers=4, heads=8, seq=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def parse(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--fixed", action="store_true", help="run with the pitfall fixed")
    p.add_argument("--snapshot", help="write the recorded window's snapshot here")
    p.add_argument("--window", choices=("step", "forward"), default="step",
                   help="one training step, or a step's forward dumped before its backward")
    p.add_argument("--steps", type=int, default=3, help="warm-up steps before the window")
    p.add_argument("--batch", type=int, default=6)
    return p.parse_args()


def setup(args):
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer


def batch(args):
    tokens = torch.randint(0, 8192, (args.batch, 201), device="cuda")
    return tokens[:, :-1], tokens[:, 1:]


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def train_step(args, model, optimizer):
    """One healthy step: gradients freed first, a forward, its backward, the update."""
    optimizer.zero_grad()
    x, y = batch(args)
    loss_of(model, x, y).backward()
    optimizer.step()


def record():
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)


def dump(args):
    """Writes the window's snapshot (--snapshot), stops recording, and prints the peak."""
    if args.snapshot:
        torch.cuda.memory._dump_snapshot(args.snapshot)
    torch.cuda.memory._record_memory_history(enabled=None)
    print(f"peak allocated {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
