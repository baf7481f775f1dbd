"""Trains many steps, each with more top-level calls than the one before (so each step's files are bigger),
printing each one: a full disk must stop it at once (tests/robustness)."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for step in range(200):
    y = model(x)
    for _ in range(step):
        y = y + 1  # one more top-level call per step: a bigger journal
    loss = y.pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} done", flush=True)
