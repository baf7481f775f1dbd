"""Step overhead of the training-state monitor beside msprobe's ``TrainerMon``, as ratios to training with no tool.

The dump benchmark's CPU transformer (``benchmarks/dump_overhead.py``: fwd + bwd + AdamW), one thread, every
step monitored, ``min``/``max``/``mean``/``norm`` written as CSV. Modes: ``none``; ``wg+mv+param`` (weight
gradients unreduced and reduced, Adam moments, parameters before and after: the update chain); ``xy``
(activations and their gradients of every module); ``all`` (both).

Each tool runs in a worker process of its own (msprobe in its venv, ``--msprobe-python``; it shares the torch
build): every mode trains its own copy of the model, and the rounds interleave the modes step by step
(rotating the order), so all of them see the same machine load. A mode's ratio is the median step's CPU time
(user + sys of the whole process, every thread: robust on a busy machine) over its worker's ``none`` median;
wall ratios print beside them, but on a loaded box wall time runs 3-10x CPU time and varies with the load.
The last column is probe's overhead as a share of msprobe's (the targets: <= 1.05x with the update chain, at
most a third of msprobe's overhead with activations).

    .venv/bin/python benchmarks/monitor_overhead.py --msprobe-python .venv-msprobe/bin/python \\
        [--hidden 512 --layers 4 --batch 8 --seq 128 --steps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHAIN = {"wg_distribution": True, "mv_distribution": True, "param_distribution": True}
MODES = {"none": None, "wg+mv+param": CHAIN, "xy": {"xy_distribution": True},
         "all": CHAIN | {"xy_distribution": True}}
OPS = ["min", "max", "mean", "norm"]
SHAPE = ("hidden", "layers", "batch", "seq", "steps", "warmup")


def _monitor(tool: str, config: dict, model, optimizer, folder: Path):
    path = folder / "monitor_config.json"
    path.write_text(json.dumps(config | {"ops": OPS, "format": "csv"}))
    if tool == "probe":
        from probe_monitor.torch_monitor import TrainerMon

        monitor = TrainerMon(str(path), params_have_main_grad=False, output_dir=str(folder / "out"))
        monitor.set_monitor(model, optimizer)
        return monitor
    from msprobe.pytorch import TrainerMon as MsTrainerMon

    os.environ["MONITOR_OUTPUT_DIR"] = str(folder / "out")
    monitor = MsTrainerMon(str(path), params_have_main_grad=False)
    monitor.set_monitor(model, grad_acc_steps=1, optimizer=optimizer)
    return monitor


def worker(args: argparse.Namespace) -> None:
    """Print JSON {mode: {"cpu": median s, "wall": median s}} for ``none`` and every mode of one tool."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dump_overhead import build_model

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix=f"monitor-bench-{args.tool}-"))
    runs = {}
    for mode, config in MODES.items():
        torch.manual_seed(0)
        model = build_model(args.hidden, args.layers)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        folder = work / mode.replace("+", "_")
        folder.mkdir()
        monitor = _monitor(args.tool, config, model, optimizer, folder) if config else None
        runs[mode] = (model, optimizer, monitor, [], [])
    x = torch.randn(args.batch, args.seq, args.hidden)
    y = torch.randint(0, 10, (args.batch,))
    modes = list(runs)
    for round_ in range(args.warmup + args.steps):
        for mode in modes[round_ % len(modes):] + modes[:round_ % len(modes)]:
            model, optimizer, _, cpu, wall = runs[mode]
            start, used = time.perf_counter(), time.process_time()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            cpu.append(time.process_time() - used)
            wall.append(time.perf_counter() - start)
    for _, _, monitor, _, _ in runs.values():
        if monitor is not None and hasattr(monitor, "close"):
            monitor.close()
    print(json.dumps({mode: {"cpu": statistics.median(cpu[args.warmup:]), "wall": statistics.median(wall[args.warmup:])}
                      for mode, (_, _, _, cpu, wall) in runs.items()}))


def run_worker(args: argparse.Namespace, tool: str, python: str) -> dict:
    command = [python, __file__, "--worker", "--tool", tool] + [f"--{k}={getattr(args, k)}" for k in SHAPE]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"the {tool} worker failed ({python}):\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=15, help="timed rounds (each runs one step of every mode)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--msprobe-python", metavar="PYTHON",
                        help="interpreter of the venv where msprobe and the same torch are installed "
                             "(.venv-msprobe/bin/python); without it only probe runs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tool", default="probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    tools = {"probe": sys.executable} | ({"msprobe": args.msprobe_python} if args.msprobe_python else {})
    results = {tool: run_worker(args, tool, python) for tool, python in tools.items()}
    base = results["probe"]["none"]
    print(f"model: hidden {args.hidden}, {args.layers} layers, batch {args.batch}x{args.seq}, 1 thread; no tool: "
          f"{base['cpu'] * 1000:.0f} ms CPU, {base['wall'] * 1000:.0f} ms wall per step (median of {args.steps})")
    print("ratios to no tool in the same worker: CPU time of the whole process (robust on a busy machine), wall")
    header = f"{'mode':<12} {'probe cpu':>9} {'wall':>6}"
    if "msprobe" in results:
        header += f" {'msprobe cpu':>11} {'wall':>6} {'probe/msprobe overhead':>22}"
    print(header)
    for mode in list(MODES)[1:]:
        ratio = {tool: {k: runs[mode][k] / runs["none"][k] for k in ("cpu", "wall")} for tool, runs in results.items()}
        line = f"{mode:<12} {ratio['probe']['cpu']:8.3f}x {ratio['probe']['wall']:5.2f}x"
        if "msprobe" in ratio:
            theirs = ratio["msprobe"]["cpu"] - 1
            share = f"{(ratio['probe']['cpu'] - 1) / theirs:21.2f}" if theirs > 0 else f"{'-':>21}"
            line += f" {ratio['msprobe']['cpu']:10.3f}x {ratio['msprobe']['wall']:5.2f}x {share}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
