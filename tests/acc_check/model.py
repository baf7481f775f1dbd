"""A small transformer for the pre-check tests: every API it calls can be re-run (dropout, a random op, too:
both runs draw from one generator state)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, CLASSES, BATCH, SEQ = 16, 2, 5, 2, 6


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // HEADS), dim=-1)
        x = x + self.proj(torch.matmul(att, v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.dropout(F.gelu(self.fc1(self.ln2(x))), p=0.0, training=self.training))


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x).mean(dim=1))


def make_step():
    """(model, one training step) with fixed data: forward, cross-entropy loss, backward."""
    torch.manual_seed(0)
    model = TinyTransformer()
    x, y = torch.randn(BATCH, SEQ, DIM), torch.tensor([1, 3])

    def step() -> None:
        F.cross_entropy(model(x), y).backward()

    return model, step


class Assorted(nn.Module):
    """Scalars, tuple indexing, reductions with indices, embeddings, casts, softmax with a dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.emb = nn.Embedding(10, 4)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        z = torch.cat([y[0, 1:3], y[1, :2]], dim=0)
        w = torch.where(z > 0, z, torch.zeros_like(z))
        peak = torch.max(y, dim=1)
        e = self.emb(ids).masked_fill(ids[..., None] > 7, 0.0)
        p = F.softmax(e, dim=-1, dtype=torch.float32)
        return w.sum() + w.view(-1).max() + peak.values.mean() + p.mean() + e.to(torch.float16).float().sum()


def assorted_step():
    torch.manual_seed(0)
    model = Assorted()
    x, ids = torch.randn(2, 2, 6, 6), torch.randint(0, 10, (3, 5))
    return model, lambda: model(x, ids).backward()
