"""What recording inside torch.compile costs: a compiled MLP block (Linear-GELU-Linear + LayerNorm, fwd + bwd +
SGD), CPU time of a compiled step under ``probe run``-style collection (PrecisionDebugger started and stopped at
every step, every step dumped; at L0/mix the module backward inside the graph too, through gradient taps) against
the same compiled step without probe (before the debugger exists and after it is closed). The model is compiled
and run before collection starts, as a script that turns probe on later does. Printed: the first step's CPU time
(compilation) with and without probe, the ratio of each timed round (the first one and the steady state), and the
graphs compiled during the timed rounds under probe (0: starting and stopping probe recompiles nothing).

    python benchmarks/compile_overhead.py [--hidden 256] [--steps 20] [--level L1] [--repeats 3]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up, self.act, self.down = nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(self.act(self.up(x))))


def _steps(model: nn.Module, x: torch.Tensor, optimizer: torch.optim.Optimizer, steps: int,
           debugger=None) -> float:
    start = time.process_time()
    for _ in range(steps):
        if debugger is not None:
            debugger.start(model)
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if debugger is not None:
            debugger.stop()
            debugger.step()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--level", default="L1", choices=("L0", "L1", "mix"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from torch._dynamo.utils import counters

    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    net = Block(args.hidden)
    x = torch.randn(64, args.hidden)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
    model = torch.compile(net)
    plain_compile = _steps(model, x, optimizer, 1)
    without = [_steps(model, x, optimizer, args.steps) for _ in range(args.repeats)]
    with tempfile.TemporaryDirectory() as dump:
        debugger = PrecisionDebugger(dump_path=dump, level=args.level, step=list(range(10 ** 6)))
        probe_compile = _steps(model, x, optimizer, 1, debugger)  # the graph is compiled again, recorded
        graphs_before = counters["stats"]["unique_graphs"]
        under = [_steps(model, x, optimizer, args.steps, debugger) for _ in range(args.repeats)]
        recompiled = counters["stats"]["unique_graphs"] - graphs_before
        debugger.close()  # the recorded graph goes: the next step compiles the model without probe again
    _steps(model, x, optimizer, 1)
    without += [_steps(model, x, optimizer, args.steps) for _ in range(args.repeats)]
    base = sorted(without)[len(without) // 2]
    print(f"hidden {args.hidden}, level {args.level}, {args.steps} steps x {args.repeats}")
    print(f"first step (compile; inductor's caches may serve) CPU s: without probe {plain_compile:.1f}, "
          f"under probe {probe_compile:.1f}")
    print(f"compiled step CPU ms without probe: {1000 * base / args.steps:.1f} (median of {len(without)} rounds)")
    print("compiled step CPU time under probe / without, per round (the first, then steady state): "
          + ", ".join(f"{t / base:.2f}x" for t in under))
    print(f"graphs compiled during the timed rounds under probe: {recompiled}")


if __name__ == "__main__":
    main()
