"""FSDP2 and tensor-parallel collection overhead: CPU time of a training step under ``probe run`` / without, on
2 gloo CPU ranks (torchrun), every step dumped, levels alternated in rounds (the least of each).

    .venv/bin/python benchmarks/sharded_overhead.py [--layouts fsdp,tp] [--levels L0,mix] [--hidden 512]
                                                    [--steps 8] [--rounds 2]

The model: ``--layers`` Linear+GELU blocks of width ``--hidden``, AdamW; FSDP2 shards every Linear and the
model (each rank its own batch), TP splits each pair of Linears column- then row-wise. Each rank times its own
steps after the first two (process CPU time, all threads; wall time beside it); the ratio is the mean over
ranks against the same layout without probe. Wall time is unreliable on a loaded 2-core box: read CPU.
msprobe is not run beside it yet.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
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
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
torch.manual_seed(1 + rank if layout == "fsdp" else 1)
x = torch.randn(64, hidden)
cpu = wall = 0.0
for step in range(steps):
    c, w = time.process_time(), time.perf_counter()
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step >= 2:
        cpu += time.process_time() - c
        wall += time.perf_counter() - w
print(f"RESULT rank{rank} {cpu / (steps - 2):.6f} {wall / (steps - 2):.6f}", flush=True)
dist.destroy_process_group()
'''


def _run(script: Path, layout: str, level: str | None, args: argparse.Namespace, work: Path) -> tuple[float, float]:
    from tests.ports import free_port

    probe = []
    if level is not None:
        config = work / f"{level}.json"
        config.write_text(json.dumps({"task": "statistics", "level": level, "dump_path": str(work / "dump")}))
        probe = [str(BIN / "probe"), "run", "-c", str(config), "--overwrite"]
    cmd = [str(BIN / "torchrun"), "--nproc_per_node=2", f"--master_port={free_port()}", *probe, str(script),
           layout, str(args.hidden), str(args.layers), str(args.steps)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=1800,
                          env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT)))
    found = re.findall(r"RESULT rank\d ([\d.]+) ([\d.]+)", done.stdout)
    if done.returncode != 0 or len(found) != 2:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return (sum(float(c) for c, _ in found) / 2, sum(float(w) for _, w in found) / 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="fsdp,tp")
    parser.add_argument("--levels", default="L0,mix")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    levels = args.levels.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "train.py"
        script.write_text(SCRIPT)
        for layout in args.layouts.split(","):
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.rounds):
                for level in (None, *levels):
                    cpu, wall = _run(script, layout, level, args, work)
                    key = level or "plain"
                    best[key] = min(best.get(key, (cpu, wall)), (cpu, wall))
            plain = best["plain"]
            print(f"{layout}: plain {plain[0] * 1e3:.1f} ms CPU, {plain[1] * 1e3:.1f} ms wall a step (2 ranks, "
                  f"hidden {args.hidden}, {args.layers} layers)")
            for level in levels:
                cpu, wall = best[level]
                print(f"  {level:4s} CPU {cpu / plain[0]:.2f}x   wall {wall / plain[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
