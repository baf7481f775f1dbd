"""Dump one training step of a tiny seeded model with probe's collector.

``python tiny_run.py OUT TASK [SUMMARY_MODE] [--perturb]``: TASK is
statistics, tensor or structure; ``--perturb`` makes the second layer
compute 3x its output (the other run of a "perturbed layer" pair).
"""

from __future__ import annotations

import sys

import torch
from torch import nn


class ScaledLinear(nn.Linear):
    """A linear layer whose output is multiplied by ``gain`` (1 normally; 3 when perturbed)."""

    gain = 1.0

    def forward(self, x):
        return super().forward(x) * self.gain


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = ScaledLinear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def main(out: str, task: str, summary_mode: str, perturb: bool) -> None:
    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    model = Tiny()
    if perturb:
        model.fc2.gain = 3.0
    x = torch.randn(4, 8)
    options = {"summary_mode": summary_mode} if task == "statistics" else {}
    debugger = PrecisionDebugger(task=task, level="mix", dump_path=out, **options)
    debugger.start(model)
    loss = model(x).pow(2).mean()
    loss.backward()
    debugger.stop()
    debugger.step()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--perturb"]
    main(args[0], args[1], args[2] if len(args) > 2 else "statistics", "--perturb" in sys.argv)
