"""A torch.compile'd Linear-GELU-Linear trained 2 SGD steps (--eager: not compiled; --plant: GELU's tanh
approximation). Prints each step's loss and the norm of the model's output, to 10 decimals."""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh" if "--plant" in sys.argv else "none"),
                    nn.Linear(16, 4))
model = net if "--eager" in sys.argv else torch.compile(net)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(6, 8)
for step in range(2):
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step{step} loss {loss.item():.10f} out {out.norm().item():.10f}")
