"""How fast is ``probe compare`` on big dumps, and how much memory does it take?

Generates a pair of synthetic statistics dumps (default 100,000 entries, 3
tensors each) and a pair of tensor-mode dumps (default 2,000 tensors of 1 M
float32 elements, .pt files), times ``probe compare`` on each (CSV only, and
with the XLSX too), and — when ``msprobe`` (mindstudio-probe) is found —
``msprobe compare`` on the same pairs in the same run, then prints the
ratios. Peak memory is the compare process' max RSS, set against the size of
the two dumps' files. For the statistics pair it prints the rows compared per CPU
second, of the whole command and marginal (the fixed costs of a compare, measured
on a 20-entry pair, left out): issue 36's bar is 200,000 per worker. The
statistics pair is also compared with one third-party comparator installed that
has no column form (docs/plugins.md's example): its cost against the plain
compare is printed (goal: at most 1.3x).

    python benchmarks/compare_speed.py [--entries N] [--tensors N] [--elements N] [--noise R]
                                       [--msprobe PATH] [--workdir DIR] [--skip-tensor] [--skip-statistics]

``--noise 1e-5`` puts every statistic of the target a little off, as two devices' numbers are: every row
then has non-zero differences to format (by default only every 997th entry differs).

The full tensor pair needs ~16 GB of disk; use --tensors/--elements to shrink it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS_PER_ENTRY = 3  # a statistics entry of write_statistics_dump: two inputs and one output
SMALL_ENTRIES = 20  # the pair whose compare is taken as the fixed costs of one (interpreter, imports, setup)
OPS = ("linear", "relu", "gelu", "layer_norm", "softmax", "dropout", "matmul", "add", "mul", "silu")
WRAPPER = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
           "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode; "
           "dt = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN); "
           "print(rc, dt, u.ru_maxrss, u.ru_utime + u.ru_stime)")


def _tensor(rng: random.Random, shape: list[int], scale: float = 1.0, jitter: random.Random | None = None,
            noise: float = 0.0) -> str:
    mx, mn, mean, norm = (rng.uniform(0.5, 3) * scale, -rng.uniform(0.5, 3) * scale,
                          rng.uniform(-0.1, 0.1) * scale, rng.uniform(1, 100) * scale)
    if jitter is not None:  # every statistic a little off, as two devices' numbers are
        mx, mn, mean, norm = (v * (1 + jitter.uniform(-noise, noise)) for v in (mx, mn, mean, norm))
    return (f'{{"type": "torch.Tensor", "dtype": "torch.float32", "shape": {json.dumps(shape)}, "Max": {mx!r}, '
            f'"Min": {mn!r}, "Mean": {mean!r}, "Norm": {norm!r}, "requires_grad": true}}')


def write_statistics_dump(folder: Path, entries: int, perturb: bool, noise: float = 0.0, seed: int = 0) -> int:
    """A synthetic dump.json with ``entries`` forward entries; returns its size in bytes. The perturbed side
    has every 997th entry's output 1% off and, with ``noise``, every statistic off by up to that fraction;
    ``seed`` draws other values (another rank's)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    jitter = random.Random(seed + 1) if perturb and noise else None
    counts = dict.fromkeys(OPS, 0)
    names = []
    with open(folder / "dump.json", "w") as out:
        out.write('{\n "task": "statistics",\n "level": "L1",\n "framework": "pytorch",\n "dump_data_dir": null,\n'
                  ' "data": {\n')
        for i in range(entries):
            op = OPS[i % len(OPS)]
            name = f"Functional.{op}.{counts[op]}.forward"
            counts[op] += 1
            names.append(name)
            scale = 1.01 if perturb and i % 997 == 500 else 1.0
            body = (f'  "{name}": {{"input_args": [{_tensor(rng, [8, 64], 1.0, jitter, noise)}, '
                    f'{_tensor(rng, [64], 1.0, jitter, noise)}], "input_kwargs": {{}}, '
                    f'"output": [{_tensor(rng, [8, 64], scale, jitter, noise)}]}}')
            out.write(body + (",\n" if i < entries - 1 else "\n"))
        out.write(" }\n}\n")
    stack = {str(i): [names[i:i + 1000], [f"File train.py, line {i}, in forward, \n y = f(x)"]]
             for i in range(0, entries, 1000)}
    (folder / "stack.json").write_text(json.dumps(stack))
    (folder / "construct.json").write_text("{}")
    return (folder / "dump.json").stat().st_size


def write_tensor_dump(folder: Path, tensors: int, elements: int, perturb: bool) -> int:
    """A tensor-mode dump with ``tensors`` .pt files (one input and one output per entry); returns bytes."""
    import torch

    data_dir = folder / "dump_tensor_data"
    data_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    data, total = {}, 0
    for i in range(tensors // 2):
        name = f"Functional.linear.{i}.forward"
        entry = {"input_args": [], "input_kwargs": {}, "output": []}
        for role, key in (("input", "input_args"), ("output", "output")):
            t = torch.randn(elements)
            if perturb and role == "output" and i % 50 == 7:
                t = t * 1.01
            data_name = f"{name}.{role}.0.pt"
            torch.save(t, data_dir / data_name)
            total += (data_dir / data_name).stat().st_size
            entry[key].append({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [elements],
                               "Max": t.max().item(), "Min": t.min().item(), "Mean": t.mean().item(),
                               "Norm": t.norm().item(), "requires_grad": False, "data_name": data_name})
        data[name] = entry
    dump = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": str(data_dir), "data": data}
    (folder / "dump.json").write_text(json.dumps(dump))
    (folder / "stack.json").write_text("{}")
    (folder / "construct.json").write_text("{}")
    return total + (folder / "dump.json").stat().st_size


def measure(command: list[str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in bytes, CPU seconds) of one command; exits on failure. Python's bytecode cache
    is on, as installed tools run (an inherited ``PYTHONDONTWRITEBYTECODE`` would have probe, installed
    editable, compile its sources on every run while msprobe's site-packages hold theirs)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *command], capture_output=True, text=True, env=env)
    parts = proc.stdout.split()
    if proc.returncode or not parts or parts[0] != "0":
        sys.exit(f"failed: {' '.join(command)}\n{proc.stdout}\n{proc.stderr}")
    return float(parts[1]), int(parts[2]) * 1024, float(parts[3])


def find_msprobe(given: str | None) -> str | None:
    for candidate in (given, shutil.which("msprobe"), "/tmp/msvenv/bin/msprobe"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


#: docs/plugins.md's comparator example, as a third party ships it: ``compare`` and ``judge``, no column form.
THIRD_PARTY = '''
from probe_core.api import ComparatorSpec, hookimpl


class AbsMeanDiff:
    columns = ["AbsMeanDiff"]

    def compare(self, pair):
        if pair.npu.mean is None or pair.bench.mean is None:
            return {}
        return {"AbsMeanDiff": abs(pair.npu.mean - pair.bench.mean)}

    def judge(self, row):
        value = row.metrics.get("AbsMeanDiff")
        if isinstance(value, float) and value > 1e-3:
            return "warning", f"mean moved by {value:.3g}"
        return None


class AbsMeanPlugin:
    @hookimpl
    def probe_comparators(self):
        return [ComparatorSpec("absmean", "statistics", "|mean difference|", AbsMeanDiff)]


plugin = AbsMeanPlugin()
'''


def third_party_path(folder: Path) -> str:
    """A folder holding the example comparator as an installed distribution (its module and a dist-info
    with the entry point), to put on PYTHONPATH: the compare finds it as it finds any pip-installed plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_absmean.py").write_text(THIRD_PARTY)
    info = folder / "bench_absmean-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-absmean\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[probe]\nabsmean = bench_absmean:plugin\n")
    return str(folder)


def rows_per_cpu_second(runs: dict[str, list], cpu: dict[str, float], rows: int, workdir: Path,
                        rounds: int = 3) -> None:
    """Print the compare's rows per CPU second of the statistics pair, of the whole command (interpreter, imports
    and all) and marginal (the CPU of the same command on a pair of :data:`SMALL_ENTRIES` entries, generated as
    the big one, taken off, and its rows too), and the third-party comparator's cost: each the min of
    ``rounds`` alternated runs of ``runs``' plain compare, its compare with the row comparator and the small
    pair's (``cpu``: the first round, from the table)."""
    plain, third = runs["probe (csv)"], runs["probe (csv, +row comparator)"]
    small_target, small_bench = workdir / "small_target" / "rank0", workdir / "small_bench" / "rank0"
    write_statistics_dump(small_target, SMALL_ENTRIES, True)
    write_statistics_dump(small_bench, SMALL_ENTRIES, False)
    small_run = [plain[0], "compare", "--quiet", small_target, small_bench, "-o", workdir / "small"]
    best = {"plain": cpu["probe (csv)"], "third": cpu["probe (csv, +row comparator)"], "small": float("inf")}
    for i in range(rounds):
        for name, command in (("small", small_run), ("plain", plain), ("third", third)):
            if i or name == "small":
                command = [str(c) for c in command]
                command[command.index("-o") + 1] += f"_{i}"
                best[name] = min(best[name], measure(command)[2])
    small_rows = SMALL_ENTRIES * ROWS_PER_ENTRY
    print(f"rows per CPU second (1 worker, min of {rounds} alternated rounds): whole command "
          f"{rows / best['plain']:,.0f} ({rows:,} rows in {best['plain']:.2f} s); marginal "
          f"{(rows - small_rows) / (best['plain'] - best['small']):,.0f} (the fixed {best['small']:.2f} s of a "
          f"{SMALL_ENTRIES}-entry pair left out); goal 200,000")
    print(f"third-party comparator without compare_columns costs {best['third'] / best['plain']:.2f}x CPU (min of "
          f"{rounds} alternated rounds; goal <= 1.3x)")


def run_pair(label: str, target: Path, bench: Path, size: int, workdir: Path, msprobe: str | None,
             workers: int, third_party: bool = False, rows: int = 0) -> None:
    probe = str(Path(sys.executable).parent / "probe")
    results, cpu = {}, {}
    runs = [("probe (csv)", [probe, "compare", "--quiet", target, bench, "-o", workdir / "p1"])]
    if third_party:  # the same compare with one more comparator that has no column form
        path = os.pathsep.join(filter(None, (third_party_path(workdir / "tp"), os.environ.get("PYTHONPATH"))))
        runs.append(("probe (csv, +row comparator)", ["env", f"PYTHONPATH={path}", probe, "compare", "--quiet",
                                                      target, bench, "-o", workdir / "p4"]))
    if workers > 1:
        runs.append((f"probe (csv, --workers {workers})", [probe, "compare", "--quiet", "--workers",
                                                           str(workers), target, bench, "-o", workdir / "p2"]))
    runs.append(("probe (csv+xlsx)", [probe, "compare", "--quiet", "--xlsx", target, bench, "-o", workdir / "p3"]))
    if msprobe:
        runs.append(("msprobe (csv)", [msprobe, "compare", "-tp", target.parent, "-gp", bench.parent,
                                       "-o", workdir / "m1"]))
    print(f"\n== {label}: dump files {size / 2**20:.1f} MiB (both sides)")
    for name, command in runs:
        seconds, peak, cpu_seconds = measure([str(c) for c in command])
        results[name], cpu[name] = seconds, cpu_seconds
        print(f"{name:32s} {seconds:8.2f} s wall {cpu_seconds:8.2f} s CPU   peak RSS {peak / 2**20:8.1f} MiB "
              f"= {peak / size:5.2f}x dump size")
    if rows and third_party:
        rows_per_cpu_second(dict(runs), cpu, rows, workdir)
    elif "probe (csv, +row comparator)" in results:
        name = "probe (csv, +row comparator)"
        print(f"third-party comparator without compare_columns costs {cpu[name] / cpu['probe (csv)']:.2f}x CPU, "
              f"{results[name] / results['probe (csv)']:.2f}x wall (goal <= 1.3x)")
    if "msprobe (csv)" in results:
        for name, seconds in results.items():
            if name.startswith("probe"):
                print(f"speed-up {name:32s} vs msprobe: {results['msprobe (csv)'] / seconds:6.1f}x wall, "
                      f"{cpu['msprobe (csv)'] / cpu[name]:6.1f}x CPU")
    else:
        print("msprobe not found (pip install mindstudio-probe into a separate venv, pass --msprobe PATH)")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--tensors", type=int, default=2_000)
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--msprobe", help="path of the msprobe console script")
    parser.add_argument("--workdir", help="where to write the dumps (default: a temporary folder)")
    parser.add_argument("--skip-tensor", action="store_true")
    parser.add_argument("--skip-statistics", action="store_true")
    parser.add_argument("--noise", type=float, default=0.0,
                        help="relative noise on every statistic of the target (e.g. 1e-5, as two devices' "
                             "numbers differ); default 0: the pair differs in every 997th entry only")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="probe_compare_bench_"))
    msprobe = find_msprobe(args.msprobe)
    try:
        if not args.skip_statistics:
            start = time.perf_counter()
            # msprobe wants step folders holding one proc/rank folder each
            target = workdir / "stat_target" / "rank0"
            bench = workdir / "stat_bench" / "rank0"
            size = write_statistics_dump(target, args.entries, True, args.noise) + \
                write_statistics_dump(bench, args.entries, False)
            print(f"generated the statistics pair ({args.entries} entries"
                  f"{f', noise {args.noise:g}' if args.noise else ''}) in {time.perf_counter() - start:.1f} s")
            run_pair(f"statistics, {args.entries} entries", target, bench, size, workdir / "out_stat", msprobe,
                     args.workers, third_party=True, rows=args.entries * ROWS_PER_ENTRY)
        if not args.skip_tensor:
            start = time.perf_counter()
            target = workdir / "tensor_target" / "rank0"
            bench = workdir / "tensor_bench" / "rank0"
            size = write_tensor_dump(target, args.tensors, args.elements, True) + \
                write_tensor_dump(bench, args.tensors, args.elements, False)
            print(f"\ngenerated the tensor pair ({args.tensors} tensors x {args.elements} elements) "
                  f"in {time.perf_counter() - start:.1f} s")
            run_pair(f"tensor, {args.tensors} tensors x {args.elements}", target, bench, size,
                     workdir / "out_tensor", msprobe, args.workers)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
