"""torch.compile'd model (default backend), CrossEntropyLoss and Adam outside it, 2 updates.

--plant: from the second update on, the inputs are scaled by 1.01 (outside the compiled model, since
what runs inside it cannot be recorded).
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
model = torch.compile(net)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(2, 6, 8), torch.randint(0, 4, (2, 6))

for step in range(2):
    inputs = x[step] * 1.01 if args.plant and step == 1 else x[step]
    loss = criterion(model(inputs), y[step])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
