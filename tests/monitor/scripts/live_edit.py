"""Trains while saving a new text into the live monitor config after each step (``DYNAMIC_MONITOR=true``): the
texts are given as a JSON list in the file named by the second argument (tests/monitor/test_run_faults.py).

    python live_edit.py CONFIG EDITS.json
"""

import json
import os
import sys

import torch

config, edits = sys.argv[1], json.loads(open(sys.argv[2]).read())
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
mtime = os.stat(config).st_mtime
for step in range(len(edits) + 2):
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()  # the monitor reads the config as the step ends
    optimizer.zero_grad()
    if step < len(edits):
        with open(config, "w") as handle:
            handle.write(edits[step])
        mtime += 1  # a new modification time per edit, however fast the steps
        os.utime(config, (mtime, mtime))
print("trained", len(edits) + 2, "steps")
