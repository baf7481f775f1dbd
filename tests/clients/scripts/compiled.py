"""torch.compile'd model (default backend), CrossEntropyLoss and Adam outside it, 2 updates.

--plant: from the second update on, the GELU inside the compiled model uses its tanh approximation (Dynamo
recompiles for it: the guard on the attribute fails).
--float64: the model and its inputs in float64 (the high-precision bench; compiled for float64).
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
model = torch.compile(net)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(2, 6, 8), torch.randint(0, 4, (2, 6))
if args.float64:
    net, x = net.double(), x.double()

for step in range(2):
    if args.plant and step == 1:
        net[1].approximate = "tanh"
    loss = criterion(model(x[step]), y[step])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
