"""FSDP2 and tensor-parallel collection overhead: CPU time of a training step under ``probe run`` / without, on
2 gloo CPU ranks (torchrun), every step dumped, levels alternated in rounds (the least of each); msprobe
(mindstudio-probe) beside it when ``--msprobe-python`` names an interpreter that has it.

    .venv/bin/python benchmarks/sharded_overhead.py [--layouts fsdp,tp] [--levels L0,mix] [--hidden 512]
                                                    [--steps 8] [--rounds 2] [--msprobe-python /tmp/msvenv/bin/python]

The model: ``--layers`` Linear+GELU blocks of width ``--hidden``, AdamW; FSDP2 shards every Linear and the
model (each rank its own batch), TP splits each pair of Linears column- then row-wise. Each rank times its own
steps after the first two (process CPU time, all threads; wall time beside it); the ratio is the mean over
ranks against the same layout without a tool. msprobe runs the same script in its own venv (its torch must be
the same version for the same losses) with its PrecisionDebugger started, stopped and stepped around every
step, inside the timed span. Each run also prints the entries of rank 0's last dumped step and whether the
last losses equal those without a tool; where msprobe fails, its error's last line stands in its column.
Wall time is unreliable on a loaded 2-core box: read CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

SCRIPT = '''
import sys, time, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
layout, hidden, layers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mesh = init_device_mesh("cpu", (2,))
rank = dist.get_rank()
torch.manual_seed(0)
blocks = []
for _ in range(layers):
    blocks += [nn.Linear(hidden, hidden), nn.GELU()]
model = nn.Sequential(*blocks)
if layout == "fsdp":
    from torch.distributed.fsdp import fully_shard
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
else:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {str(2 * i): (ColwiseParallel() if i % 2 == 0 else RowwiseParallel()) for i in range(layers - layers % 2)}
    parallelize_module(model, mesh, plan)
debugger = None
if len(sys.argv) > 5:  # an msprobe config.json: msprobe's debugger around every step
    from msprobe.pytorch import PrecisionDebugger
    debugger = PrecisionDebugger(config_path=sys.argv[5])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
torch.manual_seed(1 + rank if layout == "fsdp" else 1)
x = torch.randn(64, hidden)
cpu = wall = 0.0
for step in range(steps):
    c, w = time.process_time(), time.perf_counter()
    if debugger is not None:
        debugger.start(model)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if debugger is not None:
        debugger.stop()
        debugger.step()
    if step >= 2:
        cpu += time.process_time() - c
        wall += time.perf_counter() - w
print(f"RESULT rank{rank} {cpu / (steps - 2):.6f} {wall / (steps - 2):.6f} {loss.item()!r}", flush=True)
dist.destroy_process_group()
'''


@dataclass
class Run:
    """One torchrun of the script: mean per-step CPU and wall seconds over the ranks, the ranks' last losses,
    the entries of rank 0's last dumped step (None without a tool), or the error that stopped it."""
    cpu: float = 0.0
    wall: float = 0.0
    losses: tuple[str, ...] = ()
    entries: int | None = None
    error: str | None = None


def _error_line(stderr: str) -> str:
    """The ranks' last exception line (torchrun's own ChildFailedError report follows it), else the last line."""
    lines = [re.sub(r"^\[rank\d+\]:", "", line).strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"([\w.]+\.)?\w*(Error|Exception)\b", line)
              and "ChildFailedError" not in line]
    return (errors or lines or ["no output"])[-1]


def _entries(dump: Path) -> int:
    steps = sorted(dump.glob("step*/rank0/dump.json"), key=lambda path: int(path.parent.parent.name[4:]))
    return len(json.loads(steps[-1].read_text())["data"]) if steps else 0


def _run(script: Path, layout: str, tool: str, level: str | None, args: argparse.Namespace, work: Path) -> Run:
    """``tool``: "plain" (no tool), "probe" (under ``probe run``) or "msprobe" (its debugger in its venv)."""
    from tests.ports import free_port

    dump = work / f"dump-{tool}-{level}"
    shutil.rmtree(dump, ignore_errors=True)
    config = work / f"{tool}-{level}.json"
    settings = {"task": "statistics", "level": level, "dump_path": str(dump)}
    python, wrapper, extra, env = sys.executable, [], [], dict(os.environ, OMP_NUM_THREADS="1")
    if tool == "probe":
        config.write_text(json.dumps(settings))
        wrapper = [str(BIN / "probe"), "run", "-c", str(config), "--overwrite"]
        env["PYTHONPATH"] = str(ROOT)
    elif tool == "msprobe":
        config.write_text(json.dumps({**settings, "rank": [], "step": [], "statistics": {
            "scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}))
        python, extra = args.msprobe_python, [str(config)]
    cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}", *wrapper,
           str(script), layout, str(args.hidden), str(args.layers), str(args.steps), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=1800, env=env)
    found = re.findall(r"RESULT rank\d ([\d.]+) ([\d.]+) (-?[\d.]+(?:e[-+]\d+)?|nan|-?inf)", done.stdout)
    if done.returncode != 0 or len(found) != 2:
        if tool == "msprobe":
            return Run(error=_error_line(done.stderr))
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return Run(cpu=sum(float(c) for c, _, _ in found) / 2, wall=sum(float(w) for _, w, _ in found) / 2,
               losses=tuple(sorted(loss for _, _, loss in found)), entries=None if tool == "plain" else _entries(dump))


def _cell(run: Run, plain: Run) -> str:
    if run.error:
        return f"failed: {run.error}"
    if not run.entries:
        return f"recorded nothing (CPU {run.cpu / plain.cpu:.2f}x)"
    same = "same losses" if run.losses == plain.losses else f"LOSSES DIFFER {run.losses} vs {plain.losses}"
    return f"CPU {run.cpu / plain.cpu:5.2f}x  wall {run.wall / plain.wall:5.2f}x  {run.entries:4d} entries  {same}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="fsdp,tp")
    parser.add_argument("--levels", default="L0,mix")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--msprobe-python", metavar="PYTHON",
                        help="interpreter of a separate venv with msprobe and the same torch (default: no msprobe)")
    args = parser.parse_args()
    levels = args.levels.split(",")
    tools = ["probe", "msprobe"] if args.msprobe_python else ["probe"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "train.py"
        script.write_text(SCRIPT)
        for layout in args.layouts.split(","):
            best: dict[tuple[str, str | None], Run] = {}
            for _ in range(args.rounds):
                for tool, level in [("plain", None)] + [(tool, level) for level in levels for tool in tools]:
                    run = _run(script, layout, tool, level, args, work)
                    kept = best.get((tool, level))
                    if kept is None or kept.error or (not run.error and run.cpu < kept.cpu):
                        best[tool, level] = run
            plain = best["plain", None]
            print(f"{layout}: no tool {plain.cpu * 1e3:.1f} ms CPU, {plain.wall * 1e3:.1f} ms wall a step (2 ranks, "
                  f"hidden {args.hidden}, {args.layers} layers; entries: rank 0's last step)")
            for level in levels:
                for tool in tools:
                    print(f"  {level:4s} {tool:8s} {_cell(best[tool, level], plain)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
