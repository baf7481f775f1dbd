"""Step-time overhead of the training-state monitor, as ratios to training with no tool, measured in one run.

The dump benchmark's CPU transformer (``benchmarks/dump_overhead.py``: fwd + bwd + AdamW), one thread, every
step monitored. Each mode trains its own copy of the model in the same process and the rounds interleave
the modes step by step (rotating the order), so all of them see the same machine load; the median step
time after warm-up is compared with the no-tool median. Modes: ``none``; ``wg+mv+param`` (weight gradients
unreduced and reduced, Adam moments, parameters before and after: the update chain); ``xy`` (activations
and their gradients of every module); ``all`` (both). When ``msprobe`` (mindstudio-probe) is importable,
its ``TrainerMon`` runs the same configs on another copy and its ratios print beside probe's.

    .venv/bin/python benchmarks/monitor_overhead.py [--hidden 512 --layers 4 --batch 8 --seq 128 --steps 15]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dump_overhead import build_model  # noqa: E402  (the dump benchmark's model)

CHAIN = {"wg_distribution": True, "mv_distribution": True, "param_distribution": True}
MODES = {"none": None, "wg+mv+param": CHAIN, "xy": {"xy_distribution": True},
         "all": CHAIN | {"xy_distribution": True}}
OPS = ["min", "max", "mean", "norm"]


def _setup(args: argparse.Namespace, seed: int):
    import torch

    torch.manual_seed(seed)
    model = build_model(args.hidden, args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer


def _monitor(tool: str, config: dict, model, optimizer, folder: Path):
    path = folder / "monitor_config.json"
    path.write_text(json.dumps(config | {"ops": OPS, "format": "csv"}))
    if tool == "probe":
        from probe_monitor.torch_monitor import TrainerMon

        monitor = TrainerMon(str(path), params_have_main_grad=False, output_dir=str(folder / "out"))
        monitor.set_monitor(model, optimizer)
        return monitor
    import os

    from msprobe.pytorch import TrainerMon as MsTrainerMon

    os.environ["MONITOR_OUTPUT_DIR"] = str(folder / "out")
    monitor = MsTrainerMon(str(path), params_have_main_grad=False)
    monitor.set_monitor(model, grad_acc_steps=1, optimizer=optimizer)
    return monitor


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-msprobe", action="store_true", help="do not run msprobe even when installed")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    tools = ["probe"] + (["msprobe"] if not args.no_msprobe and importlib.util.find_spec("msprobe") else [])
    runs = {}
    work = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    for tool in tools:
        for mode, config in MODES.items():
            if config is None and tool != "probe":
                continue
            model, optimizer = _setup(args, 0)
            folder = work / f"{tool}-{mode.replace('+', '_')}"
            folder.mkdir()
            monitor = _monitor(tool, config, model, optimizer, folder) if config else None
            runs[(tool, mode)] = (model, optimizer, monitor, [])
    x = torch.randn(args.batch, args.seq, args.hidden)
    y = torch.randint(0, 10, (args.batch,))
    keys = list(runs)
    for round_ in range(args.warmup + args.steps):
        for key in keys[round_ % len(keys):] + keys[:round_ % len(keys)]:
            model, optimizer, _, times = runs[key]
            start = time.perf_counter()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
    base = statistics.median(runs[("probe", "none")][3][args.warmup:])
    print(f"model: hidden {args.hidden}, {args.layers} layers, batch {args.batch}x{args.seq}; "
          f"no tool: {base * 1000:.0f} ms/step (median of {args.steps})")
    print(f"{'mode':<14}" + "".join(f"{tool:>12}" for tool in tools))
    for mode in MODES:
        cells = []
        for tool in tools:
            if (tool, mode) in runs:
                cells.append(f"{statistics.median(runs[(tool, mode)][3][args.warmup:]) / base:>11.3f}x")
            else:
                cells.append(f"{'-':>12}")
        print(f"{mode:<14}" + "".join(cells))
    for model, optimizer, monitor, _ in runs.values():
        if monitor is not None and hasattr(monitor, "close"):
            monitor.close()


if __name__ == "__main__":
    main()
