"""A small hand-written transformer trained for three steps on the CPU, written with no knowledge of probe.

``--gelu-tanh`` switches the MLP's GELU to its tanh approximation, the kind of
quiet numerical difference between two stacks that probe is built to find.

The tests use it as a quick script with a known answer (``Functional.gelu.0.forward`` in
``Module.blocks.0.mlp.1.GELU``); ``.venv/bin/probe run examples/train_tiny.py`` dumps every model call,
torch API and gradient of its three steps under ``./probe_dump/step{N}/rank0/``. ``make demo`` trains
transformers' Llama instead (examples/train_demo.py).
"""

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // self.heads), dim=-1)
        return self.proj(torch.matmul(att, v).transpose(1, 2).reshape(b, t, d))


GELU_APPROXIMATE = "tanh" if "--gelu-tanh" in sys.argv[1:] else "none"


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(GELU_APPROXIMATE), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, layers: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))


def main(steps: int = 3) -> None:
    torch.manual_seed(0)
    model = TinyTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        x, y = torch.randn(4, 8, 32), torch.randint(0, 10, (4,))
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
