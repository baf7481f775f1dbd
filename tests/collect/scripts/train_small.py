"""An unmodified training script (no probe import): 3 steps of a tiny model.

argv[1]: "ok" (default), "exit" (sys.exit(3) after step 1), "raise" (ValueError after step 1),
"hang" (prints READY in the middle of step 2 and sleeps: the test kills it).
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

behaviour = sys.argv[1] if len(sys.argv) > 1 else "ok"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    logits = model(x)
    if behaviour == "hang" and step == 2:
        time.sleep(0.5)  # let the writer thread journal the forward records
        print("READY", flush=True)
        time.sleep(60)
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 1 and behaviour == "exit":
        sys.exit(3)
    if step == 1 and behaviour == "raise":
        raise ValueError("boom in the training script")
print("done", flush=True)
