"""Where a collected step's extra time goes: the statistics, against the memory floor, and the rest.

On the CPU transformer of ``dump_overhead.py`` (one thread, every step dumped), each level runs in one
process beside steps without collection, interleaved, three ways: as is; with the statistics replaced by
constants (hooks, naming, encoding and journaling only: "machinery"); and with each tensor's statistics
call timed (probe's statistics in place, on tensors as warm or cold as the step leaves them). The floor
is what reading the same bytes once costs: one ``torch.sum`` pass over tensors of the same sizes, read
from memory (a working set far beyond the caches), the least any exact statistic of every byte can take.

    .venv/bin/python benchmarks/collect_breakdown.py [--levels L0,L1,mix] [--steps 12]

Measured on the 2-core box (the AVX2 kernel), 12 steps each:

    level   probe machinery statistics      read    floor stats/floor floor share
    L0      1.11x     1.03x    24.5 ms   312 MiB  29.4 ms       0.83x       7.7%
    L1      1.29x     1.11x    58.2 ms   705 MiB  66.4 ms       0.88x      16.9%
    mix     1.32x     1.15x    61.3 ms   725 MiB  64.9 ms       0.94x      16.5%

probe's statistics take less than the floor (some tensors are still in cache when they are read): the
kernel runs at memory speed. At L0, one read of the recorded bytes alone is 7.7% of the step here.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dump_overhead import _setup, _step  # noqa: E402


def _read_floor(sizes: list[int]) -> float:
    """Seconds one ``torch.sum`` pass takes over float32 tensors of ``sizes`` elements, read from memory."""
    import torch

    working_set = 512 << 20  # bytes: past the caches, so each tensor comes from memory as in a step
    rounds = max(1, working_set // max(4 * sum(sizes), 1))
    tensors = [[torch.ones(n) for n in sizes] for _ in range(rounds)]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for group in tensors:
            for t in group:
                t.sum()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best


def run_level(level: str, steps: int, args: argparse.Namespace) -> dict[str, float]:
    import probe_torch.ops as ops
    from probe_torch import PrecisionDebugger

    model, optimizer, x, y = _setup(args)
    real = ops._launch_stats
    spent = {"seconds": 0.0, "bytes": 0, "sizes": []}

    def timed(tensor):
        start = time.perf_counter()
        try:
            return real(tensor)
        finally:
            spent["seconds"] += time.perf_counter() - start
            spent["bytes"] += tensor.numel() * tensor.element_size()
            spent["sizes"].append(tensor.numel() * tensor.element_size() // 4)

    def constant(tensor):
        return ("h", None, (0.0, 0.0, 0.0, 0.0), 0)

    root = Path(tempfile.mkdtemp(prefix="breakdown-"))
    variants = {"none": None, "probe": real, "machinery": constant, "timed": timed}
    debuggers = {name: PrecisionDebugger(dump_path=str(root / name), level=level) if stats else None
                 for name, stats in variants.items()}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    in_stats: list[tuple[float, int, list[int]]] = []
    try:
        for round_ in range(steps + 2):
            order = list(variants)[round_ % len(variants):] + list(variants)[:round_ % len(variants)]
            for name in order:
                ops._launch_stats = variants[name] or real
                spent.update(seconds=0.0, bytes=0, sizes=[])
                _, used = _step(model, optimizer, x, y, debuggers[name])
                if round_ >= 2:
                    cpu[name].append(used)
                    if name == "timed":
                        in_stats.append((spent["seconds"], spent["bytes"], list(spent["sizes"])))
                for folder in (root / name).glob("step*"):
                    shutil.rmtree(folder, ignore_errors=True)
    finally:
        ops._launch_stats = real
        for debugger in debuggers.values():
            if debugger is not None:
                debugger.close()
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(cpu["none"])
    seconds = statistics.median(s for s, _, _ in in_stats)
    read = statistics.median(b for _, b, _ in in_stats)
    return {"base": base, "probe": statistics.median(cpu["probe"]) / base,
            "machinery": statistics.median(cpu["machinery"]) / base, "stats": seconds, "bytes": read,
            "floor": _read_floor(in_stats[-1][2])}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="L0,L1,mix")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"model: hidden {args.hidden}, {args.layers} layers, batch {args.batch}, seq {args.seq}; "
          f"{args.steps} steps of each variant, interleaved; CPU time ratios to the same process's steps "
          "without collection")
    print(f"{'level':6} {'probe':>6} {'machinery':>9} {'statistics':>10} {'read':>9} {'floor':>8} "
          f"{'stats/floor':>11} {'floor share':>11}")
    for level in args.levels.split(","):
        r = run_level(level, args.steps, args)
        print(f"{level:6} {r['probe']:5.2f}x {r['machinery']:8.2f}x {r['stats'] * 1000:7.1f} ms "
              f"{r['bytes'] / 2**20:5.0f} MiB {r['floor'] * 1000:5.1f} ms {r['stats'] / r['floor']:10.2f}x "
              f"{r['floor'] / r['base']:10.1%}", flush=True)
    print("probe: with collection; machinery: statistics replaced by constants; statistics: the time of probe's "
          "statistics calls in a step; floor: one torch.sum pass over the same bytes from memory; floor share: "
          "the floor as a share of the step without collection")


if __name__ == "__main__":
    main()
