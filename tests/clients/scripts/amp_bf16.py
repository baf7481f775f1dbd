"""Automatic mixed precision: torch.autocast (CPU, bfloat16) and GradScaler, 2 updates.

--plant: from the second update on, the GELU uses its tanh approximation.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(2, 8, 16), torch.randint(0, 4, (2, 8))

for step in range(2):
    if args.plant and step == 1:
        model[1].approximate = "tanh"
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x[step]), y[step])
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
