"""Trains one step, then waits until the file named by its first argument exists, then trains two more: a monitor
run that is still writing while a test starts a second one into the same folder (tests/monitor/test_run_faults.py)."""

import sys
import time
from pathlib import Path

import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
go = Path(sys.argv[1])
for step in range(3):
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    deadline = time.monotonic() + 120
    while step == 0 and not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
print("done")
