"""What recording inside torch.compile costs: a compiled MLP block (Linear-GELU-Linear + LayerNorm, fwd + bwd +
SGD), CPU time of a step compiled under ``probe run``-style collection (PrecisionDebugger, every step dumped;
at L0/mix the module backward inside the graph too, through gradient taps) against the same compiled step
without probe, alternating the two; compile time reported apart, and the graphs compiled during the timed
rounds (a recompile there would be measured as recording).

    python benchmarks/compile_overhead.py [--hidden 256] [--steps 20] [--level L1] [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
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


def _steps(model: nn.Module, net: nn.Module, x: torch.Tensor, steps: int, debugger=None) -> float:
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
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
    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    net = Block(args.hidden)
    x = torch.randn(64, args.hidden)
    plain = torch.compile(net)
    begin = time.process_time()
    _steps(plain, net, x, 1)
    plain_compile = time.process_time() - begin
    with tempfile.TemporaryDirectory() as dump:
        debugger = PrecisionDebugger(dump_path=dump, level=args.level, step=list(range(10 ** 6)))
        debugger.start()  # torch.compile's backends are wrapped while collection is installed
        twin = copy.deepcopy(net)  # a module of its own: Dynamo compiles it anew, with the wrapped backend
        recorded = torch.compile(twin)
        begin = time.process_time()
        _steps(recorded, twin, x, 1, debugger)
        probe_compile = time.process_time() - begin
        _steps(plain, net, x, 1)  # each variant once more: Dynamo compiles each once for the other's setting
        _steps(recorded, twin, x, 1, debugger)
        ratios = []
        from torch._dynamo.utils import counters
        graphs_before = counters["stats"]["unique_graphs"]
        for _ in range(args.repeats):
            without = _steps(plain, net, x, args.steps)
            with_probe = _steps(recorded, twin, x, args.steps, debugger)
            ratios.append(with_probe / without)
        recompiled = counters["stats"]["unique_graphs"] - graphs_before
        debugger.close()
    print(f"hidden {args.hidden}, level {args.level}, {args.steps} steps x {args.repeats}")
    print(f"first step (compile; inductor's caches may serve) CPU s: without probe {plain_compile:.1f}, "
          f"under probe {probe_compile:.1f}")
    print("compiled step CPU time under probe / without: " + ", ".join(f"{r:.2f}x" for r in ratios))
    # a first round that compiled inside the timed steps (a variant not yet compiled for the other's setting)
    # measured compilation, not recording: the timed rounds must compile nothing
    print(f"graphs compiled during the timed rounds: {recompiled}")


if __name__ == "__main__":
    main()
