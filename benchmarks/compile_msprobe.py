"""msprobe (mindstudio-probe) on the compiled model of benchmarks/compile_overhead.py: does a torch.compile'd
training step run under its PrecisionDebugger, are the losses those without it, what does it record, and what does
a step cost under it against the same compiled step before msprobe existed. One level a process (msprobe patches
torch globally and has no close). Run with msprobe's venv (same torch as probe's):

    /tmp/msvenv/bin/python benchmarks/compile_msprobe.py [--hidden 256] [--steps 20] [--level L0] [--repeats 3]

Same Block (imported), input, SGD and step as compile_overhead.py; the model is compiled and run before msprobe starts.
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_overhead import Block  # noqa: E402  (the same model as probe's benchmark; it imports only torch)


def _steps(model, x, optimizer, steps, debugger=None, losses=None) -> float:
    """``steps`` training steps of the compiled ``model``; under ``debugger`` it is started on the module the model
    compiled (msprobe's start(compiled model) fails: it asks ``if model:``, and OptimizedModule has no len)."""
    start = time.process_time()
    for _ in range(steps):
        if debugger is not None:
            debugger.start(model._orig_mod)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if debugger is not None:
            debugger.stop()
            debugger.step()
        if losses is not None:
            losses.append(loss.item())
    return time.process_time() - start


def _recorded(dump: Path) -> list[collections.Counter]:
    """Entry kinds (Module/Functional/Tensor/...) of every dumped step, in step order."""
    files = sorted(dump.glob("step*/**/dump.json"), key=lambda path: int(path.relative_to(dump).parts[0][4:]))
    return [collections.Counter(key.split(".")[0] for key in json.loads(f.read_text())["data"]) for f in files]


def _summary(error: BaseException | None) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and "msprobe ERROR" not in line]
    return f"{type(error).__name__}: {' / '.join(lines[:2])}" if error is not None else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--level", default="L0", choices=("L0", "L1", "mix"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-steps", type=int, default=3, help="steps whose losses are compared")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    net = Block(args.hidden)
    twins = [copy.deepcopy(net) for _ in range(2)]  # loss check: one without msprobe, one under it
    x = torch.randn(64, args.hidden)
    twin_models = [torch.compile(twin) for twin in twins]
    twin_opts = [torch.optim.SGD(twin.parameters(), lr=1e-3) for twin in twins]
    plain_losses: list[float] = []
    for model, optimizer in zip(twin_models, twin_opts):
        _steps(model, x, optimizer, 1)
    _steps(twin_models[0], x, twin_opts[0], args.check_steps, losses=plain_losses)

    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
    model = torch.compile(net)
    plain_compile = _steps(model, x, optimizer, 1)
    without = [_steps(model, x, optimizer, args.steps) for _ in range(args.repeats)]

    from msprobe.pytorch import PrecisionDebugger

    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump"
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"task": "statistics", "level": args.level, "dump_path": str(dump), "rank": [],
                                      "step": [], "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                                 "summary_mode": "statistics"}}))
        debugger = PrecisionDebugger(config_path=str(config))
        try:
            debugger.start(twin_models[1])  # as compile_overhead.py starts probe
            debugger.stop()
            print("debugger.start(compiled model): ran")
        except Exception as error:  # noqa: BLE001 - reported, then the original module is given instead
            print(f"debugger.start(compiled model) failed: {type(error).__name__}: {error}; "
                  "below: debugger.start(compiled._orig_mod)")
        ms_losses: list[float] = []
        try:
            _steps(twin_models[1], x, twin_opts[1], args.check_steps, debugger, ms_losses)
            graphs_before = counters["stats"]["unique_graphs"]
            ms_compile = _steps(model, x, optimizer, 1, debugger)
            under = [_steps(model, x, optimizer, args.steps, debugger) for _ in range(args.repeats)]
        except Exception as error:  # noqa: BLE001 - the finding: say why there is no figure
            print(f"msprobe, level {args.level}, torch {torch.__version__}: the compiled step failed after "
                  f"{len(ms_losses)} steps: {_summary(error)}; cause: {_summary(error.__cause__)}; "
                  f"losses of those steps {'same as' if ms_losses == plain_losses[:len(ms_losses)] else 'DIFFER from'}"
                  f" those without; dumped steps' entries: {[sum(c.values()) for c in _recorded(dump)]}")
            return
        recompiled = counters["stats"]["unique_graphs"] - graphs_before
        recorded = _recorded(dump)
    after = [_steps(model, x, optimizer, args.steps) for _ in range(args.repeats)]
    base = sorted(without)[len(without) // 2]
    print(f"msprobe, hidden {args.hidden}, level {args.level}, {args.steps} steps x {args.repeats}, torch "
          f"{torch.__version__}")
    print(f"losses of {args.check_steps} steps: without {plain_losses}, under msprobe {ms_losses}: "
          + ("same" if plain_losses == ms_losses else "DIFFER"))
    kinds = sorted({kind for counter in recorded for kind in counter})
    print(f"steps dumped: {len(recorded)}; entries a step (first, last): "
          f"{sum(recorded[0].values()) if recorded else 0}, {sum(recorded[-1].values()) if recorded else 0}; "
          f"kinds in the last: {dict(recorded[-1]) if recorded else {}} (all kinds seen: {kinds})")
    print(f"first step under msprobe CPU s: {ms_compile:.2f} (first compiled step without: {plain_compile:.1f})")
    print(f"compiled step CPU ms without msprobe: {1000 * base / args.steps:.1f} (median of {len(without)} rounds)")
    print("compiled step CPU time under msprobe / without, per round: " + ", ".join(f"{t / base:.2f}x" for t in under))
    print("after msprobe stopped (its patches stay) / without, per round: "
          + ", ".join(f"{t / base:.2f}x" for t in after))
    print(f"graphs compiled during the timed rounds under msprobe: {recompiled}")


if __name__ == "__main__":
    main()
