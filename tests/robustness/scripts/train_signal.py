"""A small training loop that ends itself in step ``--at`` after the forward: a signal, or waiting.

    train_signal.py [--steps N] [--at STEP] [--signal KILL|TERM|INT|none] [--wait-file PATH] [--signal-after PATH]

``--wait-file``: after step 0 create PATH.ready and wait until PATH exists (a live writer for tests).
``--signal-after``: send the signal once PATH exists (the files of the steps before, which probe's writer
thread writes while the next step runs).
"""

import argparse
import os
import signal
import time
from pathlib import Path

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--at", type=int, default=1)
parser.add_argument("--signal", default="none")
parser.add_argument("--wait-file", default=None)
parser.add_argument("--signal-after", default=None)
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for step in range(args.steps):
    loss = model(x).pow(2).mean()
    if step == args.at and args.signal != "none":
        deadline = time.time() + 60
        while args.signal_after and not Path(args.signal_after).exists() and time.time() < deadline:
            time.sleep(0.01)
        print("sending", args.signal, flush=True)
        os.kill(os.getpid(), getattr(signal, "SIG" + args.signal))
        time.sleep(5)  # the signal arrives here
        print("still running after the signal", flush=True)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} done", flush=True)
    if step == 0 and args.wait_file:
        Path(args.wait_file + ".ready").write_text("ready")
        deadline = time.time() + 60
        while not Path(args.wait_file).exists() and time.time() < deadline:
            time.sleep(0.05)
