"""How does ``probe compare`` scale with ranks and workers?

A synthetic job of ``--ranks`` ranks (default 1,024) x ``--entries`` entries (default 20,000, 3 tensors each)
is laid out lazily: one pair of dump files is generated, and every rank folder of both sides links to it, so
the job takes the disk of one rank. probe then compares a sample of ``--sample`` ranks (default 8) three
ways, in one run:

* one process (``--workers 1``);
* ``--workers 2`` local processes (one rank chain per job);
* a real Dask cluster of 2 local worker processes (``--scheduler``, the path a Slurm/PBS cluster takes);

and prints compared rows per second per worker, the speed-up of 2 workers over 1, and the time the whole
job would take on this machine and on N workers at the measured per-worker rate. Each way also compares the
first half of the sample on its own: the difference between the two runs is the *marginal* rate, each way's
fixed costs (the interpreter and its imports, Dask's client and connection, the cluster's workers importing
probe at their first job) left out, which is the rate the rest of a long job runs at; one process's rates are
printed per CPU second too (whole and marginal), the measure of issue 36's bar of 200,000. ``--full`` compares every
rank instead of a sample (each rank writes its own CSV: mind the disk, about 10 MiB per rank at 20k entries),
and ``--runs`` picks which of the three ways run (``--full --runs dask``: the whole job on the cluster, timed).
Last, it prints the floor the issue names for one rank pair, decoding its two dump.json files and nothing else,
and the rate of probe's own reading pass alone: on the 2-core box, 455,000 and 312,000 rows/s, against
probe's 110,000 for the whole compare.

``--distinct 64,256`` measures instead of extrapolating: every rank of both sides gets its own generated dump
(other values per rank, ``--noise`` on the target's statistics), written to disk and dropped from the page cache
(``posix_fadvise(DONTNEED)`` after ``fsync``), and each job of that many ranks is compared whole on a local Dask
cluster of 1, then 2 worker processes (``--scheduler``, as a Slurm/PBS cluster is used). It prints rows/s per
worker for each job size and worker count, and what a 1,024-rank job would take at the per-worker rate of the
largest job. Mind the disk: about 1.3 MiB per rank and side at 2,000 entries.

    python benchmarks/scale.py [--ranks 1024] [--entries 20000] [--sample 8] [--full] [--runs one,local,dask]
                               [--workdir DIR]
    python benchmarks/scale.py --distinct 64,256 [--entries 2000] [--noise 1e-5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_speed import ROWS_PER_ENTRY, measure, write_statistics_dump  # noqa: E402

TARGET_ROWS_PER_SECOND = 200_000
TARGET_JOB_SECONDS = 600


def lay_out(root: Path, source: Path, ranks: int) -> Path:
    """``root/step0/rank{0..ranks-1}/`` whose files link to ``source``'s (no copy: one rank's disk)."""
    for rank in range(ranks):
        folder = root / "step0" / f"rank{rank}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("dump.json", "stack.json", "construct.json"):
            link = folder / name
            if not link.exists():
                link.symlink_to(source / name)
    return root


def decoding_floor(pair: dict[str, Path], rows: int) -> tuple[float, float]:
    """Rows/s of one rank's pair (``rows`` rows) at the floor the issue names, decoding the two dump.json files
    (read and ``msgspec.json.decode`` each whole, nothing else), and at probe's own reading pass (its streaming
    scanner indexing both files, as a compare reads them once). Best of three, in this process, the cyclic
    garbage collector paused as in a compare (with it running, the whole-file decode is three times slower)."""
    import msgspec

    from probe_core.dump import RankDump
    from probe_core.gcpause import collector_paused

    def best(work) -> float:
        times = []
        for _ in range(3):
            with collector_paused():
                start = time.perf_counter()
                work()
                times.append(time.perf_counter() - start)
        return rows / min(times)

    files = [folder / "dump.json" for folder in pair.values()]
    decoded = best(lambda: [msgspec.json.decode(path.read_bytes()) for path in files])
    scanned = best(lambda: [RankDump(path).index() for path in files])
    return decoded, scanned


def compare(target: Path, bench: Path, out: Path, ranks: list[int], *flags: str) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the command and its children, summary) of one ``probe compare``."""
    shutil.rmtree(out, ignore_errors=True)
    probe = str(Path(sys.executable).parent / "probe")
    command = [probe, "compare", "--quiet", str(target), str(bench), "-o", str(out),
               "--rank", ",".join(map(str, ranks)), *flags]
    seconds, _, cpu = measure(command)
    summary = json.loads((out / "summary.json").read_text())
    return seconds, cpu, summary


def uncached(folder: Path) -> None:
    """Write ``folder``'s files to disk and drop them from the page cache, so a compare reads them from disk."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _process_cpu() -> float:
    """CPU seconds of the process this runs in (a Dask worker's, through ``Client.run``)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def distinct_jobs(sizes: list[int], entries: int, noise: float, workdir: Path) -> None:
    """Compare jobs of ``sizes`` ranks whose every rank pair is its own, on 1 and 2 Dask workers. Rates are
    given per wall second and per CPU second of the workers (on a loaded machine the second is the one to read:
    wall time counts other processes' turns too)."""
    from distributed import Client, LocalCluster

    start = time.perf_counter()
    for rank in range(max(sizes)):
        for side in ("target", "bench"):
            folder = workdir / side / "step0" / f"rank{rank}"
            if not (folder / "dump.json").exists():
                write_statistics_dump(folder, entries, perturb=side == "target", noise=noise, seed=1000 * rank)
    size = sum(f.stat().st_size for f in workdir.rglob("*.json"))
    print(f"generated {max(sizes)} distinct rank pairs x {entries} entries in {time.perf_counter() - start:.0f} s "
          f"({size / 2**20:.0f} MiB on disk)")
    print(f"\n{'ranks':>6s} {'workers':>8s} {'wall s':>8s} {'worker CPU s':>13s} {'CLI CPU s':>10s} "
          f"{'rows/s/worker':>14s} {'rows/CPU s':>11s}")
    rates: dict[tuple[int, int], float] = {}
    for ranks in sizes:
        rows = ranks * entries * ROWS_PER_ENTRY
        for workers in (1, 2):
            for side in ("target", "bench"):
                for rank in range(ranks):
                    uncached(workdir / side / "step0" / f"rank{rank}")
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                before = client.run(_process_cpu)
                seconds, _, cli_cpu = measure_compare(workdir, ranks, workers, cluster.scheduler_address)
                after = client.run(_process_cpu)
            worker_cpu = sum(after[address] - before.get(address, 0.0) for address in after)
            rates[(ranks, workers)] = rows / worker_cpu
            print(f"{ranks:6d} {workers:8d} {seconds:8.1f} {worker_cpu:13.1f} {cli_cpu:10.1f} "
                  f"{rows / seconds / workers:14,.0f} {rows / worker_cpu:11,.0f}")
    largest = max(sizes)
    per_worker = rates[(largest, 2)]
    total = 1024 * entries * ROWS_PER_ENTRY
    print(f"\nper worker CPU second, {largest} ranks on 2 workers: {per_worker:,.0f} rows "
          f"({per_worker / rates[(largest, 1)]:.2f} of 1 worker's; target {TARGET_ROWS_PER_SECOND:,} rows/s a worker)")
    for workers in (2, 8, 32, 128):
        print(f"  a 1,024-rank job of {entries} entries a rank on {workers:3d} unloaded workers at that rate: "
              f"{total / per_worker / workers / 60:6.1f} min")


def measure_compare(workdir: Path, ranks: int, workers: int, scheduler: str) -> tuple[float, int, float]:
    out = workdir / f"out_{ranks}_{workers}"
    shutil.rmtree(out, ignore_errors=True)
    probe = str(Path(sys.executable).parent / "probe")
    return measure([probe, "compare", "--quiet", str(workdir / "target"), str(workdir / "bench"), "-o", str(out),
                    "--rank", f"0-{ranks - 1}", "--scheduler", scheduler])


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--sample", type=int, default=8, help="ranks compared in each measurement")
    parser.add_argument("--full", action="store_true", help="compare every rank, not a sample")
    parser.add_argument("--runs", default="one,local,dask",
                        help="which ways to run, comma-separated: one (1 process), local (2 local processes), "
                             "dask (a 2-worker local Dask cluster)")
    parser.add_argument("--workdir", help="where to write the pair and results (default: a temporary folder)")
    parser.add_argument("--distinct", metavar="SIZES",
                        help="comma-separated job sizes in ranks (e.g. 64,256): distinct dumps per rank, whole jobs")
    parser.add_argument("--noise", type=float, default=1e-5, help="with --distinct: the target's statistics noise")
    args = parser.parse_args()
    if args.distinct:
        try:
            sizes = sorted({int(size) for size in args.distinct.split(",")})
        except ValueError:
            parser.error(f"--distinct {args.distinct}: give rank counts, e.g. 64,256")
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="probe_scale_"))
        entries = args.entries if "--entries" in sys.argv else 2000
        try:
            distinct_jobs(sizes, entries, args.noise, workdir)
        finally:
            if not args.workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        return
    wanted = set(args.runs.split(","))
    if not wanted or wanted - {"one", "local", "dask"}:
        parser.error(f"--runs {args.runs}: give one or more of one, local, dask")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="probe_scale_"))
    try:
        start = time.perf_counter()
        pair = {side: workdir / "pair" / side for side in ("target", "bench")}
        for side, folder in pair.items():
            if not (folder / "dump.json").exists():
                write_statistics_dump(folder, args.entries, perturb=side == "target")
        target = lay_out(workdir / "target", pair["target"], args.ranks)
        bench = lay_out(workdir / "bench", pair["bench"], args.ranks)
        print(f"laid out {args.ranks} ranks x {args.entries} entries per side in {time.perf_counter() - start:.1f} s "
              f"(disk: one rank's pair, {sum(f.stat().st_size for p in pair.values() for f in p.iterdir()) / 2**20:.0f} MiB)")
        ranks = list(range(args.ranks if args.full else min(args.sample, args.ranks)))
        rows = len(ranks) * args.entries * ROWS_PER_ENTRY
        half = ranks[:len(ranks) // 2]
        half_rows = len(half) * args.entries * ROWS_PER_ENTRY
        runs = {}
        halves = {}  # the first half of the sample alone: wall seconds
        half_cpu = {}  # ... and CPU seconds
        summaries = []

        def measured(name: str, workers: int, out: str, *flags: str) -> None:
            if half and not args.full:
                halves[name], half_cpu[name], _ = compare(target, bench, workdir / out, half, *flags)
            seconds, cpu, summary = compare(target, bench, workdir / out, ranks, *flags)
            runs[name] = (workers, seconds, cpu)
            summaries.append(summary)

        if "one" in wanted:
            measured("1 process", 1, "out1")
        if "local" in wanted:
            measured("2 local processes", 2, "out2", "--workers", "2")
        if "dask" in wanted:
            from distributed import LocalCluster

            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
                measured("Dask cluster, 2 workers", 2, "out3", "--scheduler", cluster.scheduler_address)
        same = all(s["first_divergence"] == summaries[0]["first_divergence"] and s["counts"] == summaries[0]["counts"]
                   for s in summaries)
        print(f"\n== {len(ranks)} ranks x {args.entries} entries = {rows:,} rows; the summaries agree: {same}")
        print(f"{'':26s} {'wall s':>8s} {'rows/s':>10s} {'rows/s/worker':>14s} {'speed-up':>9s}")
        base = runs["1 process"][1] if "1 process" in runs else None
        for name, (workers, seconds, _) in runs.items():
            speed_up = f"{base / seconds:8.2f}x" if base else f"{'-':>9s}"
            print(f"{name:26s} {seconds:8.2f} {rows / seconds:10,.0f} {rows / seconds / workers:14,.0f} {speed_up}")
        marginal = {name: (rows - half_rows) / (runs[name][1] - seconds) for name, seconds in halves.items()
                    if runs[name][1] > seconds}
        if marginal:
            print(f"\nmarginal rate (the {len(ranks) - len(half)} ranks beyond the first {len(half)}: each way's "
                  "fixed costs left out):")
            one = marginal.get("1 process")
            for name, rate in marginal.items():
                workers = runs[name][0]
                speed_up = f"{rate / one:8.2f}x" if one else f"{'-':>9s}"
                print(f"{name:26s} {'':8s} {rate:10,.0f} {rate / workers:14,.0f} {speed_up}")
        total_rows = args.ranks * args.entries * ROWS_PER_ENTRY
        print(f"\nthe whole job ({args.ranks} ranks, {total_rows:,} rows), target {TARGET_JOB_SECONDS / 60:.0f} min:")
        for name, (workers, seconds, _) in runs.items():
            if workers > 1:
                what = "measured" if len(ranks) == args.ranks else f"at the rate of {len(ranks)} ranks"
                print(f"  on this machine, {name}: {total_rows / (rows / seconds) / 60:7.1f} min ({what})")
                if name in marginal:
                    fixed = seconds - rows / marginal[name]
                    print(f"  on this machine, {name}: {(fixed + total_rows / marginal[name]) / 60:7.1f} min "
                          f"(its fixed {fixed:.1f} s, then the marginal rate)")
        decoded, scanned = decoding_floor(pair, args.entries * ROWS_PER_ENTRY)
        print(f"\nthe floor, one rank pair in this process: decoding both dump.json files (msgspec, whole) "
              f"{decoded:,.0f} rows/s; probe's reading pass alone (its scanner indexing both) "
              f"{scanned:,.0f} rows/s")
        if base:
            per_worker = rows / base
            steady = f", {marginal['1 process']:,.0f} marginal" if "1 process" in marginal else ""
            print(f"per-worker rate (1 process): {per_worker:,.0f} rows/s{steady} (target {TARGET_ROWS_PER_SECOND:,})")
            cpu = runs["1 process"][2]
            steady_cpu = (f", {(rows - half_rows) / (cpu - half_cpu['1 process']):,.0f} marginal"
                          if cpu > half_cpu.get("1 process", cpu) else "")
            print(f"per CPU second (1 process, the bar of issue 36): {rows / cpu:,.0f} rows{steady_cpu}")
            for workers in (8, 32, 128, 512):
                print(f"  on {workers:3d} workers at the per-worker rate: {total_rows / per_worker / workers / 60:7.1f} min")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
