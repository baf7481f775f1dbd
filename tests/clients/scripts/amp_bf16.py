"""Automatic mixed precision: torch.autocast (CPU, bfloat16) and GradScaler, 2 updates.

--plant: from the second update on, the GELU uses its tanh approximation.
--float64: the high-precision bench: no autocast, the model and the inputs in float64 (GradScaler kept).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(2, 8, 16), torch.randint(0, 4, (2, 8))
if args.float64:
    model, x = model.double(), x.double()

for step in range(2):
    if args.plant and step == 1:
        model[1].approximate = "tanh"
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not args.float64):
        loss = F.cross_entropy(model(x[step]), y[step])
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
