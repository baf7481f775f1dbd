"""A loop with optimizer.step(closure): LBFGS (the closure runs several times per update), 2 updates.

--plant: from the second update on, the GELU uses its tanh approximation.
--float64: the model and the data in float64 (the high-precision bench).
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
x, y = torch.randn(2, 6, 8), torch.randn(2, 6, 1)
if args.float64:
    model, x, y = model.double(), x.double(), y.double()

for step in range(2):
    if args.plant and step == 1:
        model[1].approximate = "tanh"

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[step]), y[step])
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    print(f"step {step} loss {loss.item():.4f}")
