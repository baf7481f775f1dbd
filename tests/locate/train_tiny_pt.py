"""The PyTorch twin of ``train_tiny_ms.py``: the same MLP, initial weights, batches and optimizer (Adam), for a
MindSpore target against a PyTorch bench. ``--steps S`` (default 4)."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import twin_data

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
with torch.no_grad():
    for name, param in model.named_parameters():
        param.copy_(torch.from_numpy(twin_data.weights()[name]))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-12)
for step, (x, y) in enumerate(twin_data.batches(args.steps)):
    loss = F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.6f}", flush=True)
