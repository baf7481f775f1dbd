"""How many APIs per second does ``probe acc-check`` check, serially and with ``--workers 2``?

Collects a small transformer's L1 dump (``probe run --level L1 examples/train_tiny.py``), takes one step's
API calls (default: step 1, the steady training step) and repeats them ``--scale`` times (renumbered: a
longer run of the same model), then runs the pre-check serially and with ``--workers 2``, each
``--repeat`` times, and prints for each: the APIs checked per second in the check itself (imports done
first; worker start-up included) and the wall time of the whole ``probe acc-check`` command
(interpreter start and imports included).

    python benchmarks/acc_check_speed.py [--step N] [--scale K] [--dtype bfloat16] [--repeat N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = [sys.executable, "-c", "import sys; from probe_core.cli import main; sys.exit(main(sys.argv[1:]))"]
TIMED = """
import json, sys, time
import torch  # imported before the clock starts, as in a long run
from probe_core.plugins import current_registry
from probe_acc_check import CheckOptions, run_check
dump, out, workers, dtype = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] or None
registry = current_registry()
start = time.perf_counter()
summary = run_check(CheckOptions(dump, out, workers=workers, dtype=dtype), registry)
print(json.dumps({"seconds": time.perf_counter() - start, "apis": summary["apis"], "skipped": summary["skipped"]}))
"""


def collect(workdir: Path) -> Path:
    dump = workdir / "dump"
    subprocess.run([*PROBE, "run", "--level", "L1", "--dump-path", str(dump), str(ROOT / "examples" / "train_tiny.py")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    return dump


def scaled(step_dump: Path, scale: int, out: Path) -> Path:
    """``step_dump``'s API entries repeated ``scale`` times, call counts renumbered (one dump.json in ``out``)."""
    dump = json.loads((step_dump / "dump.json").read_text())
    data = {}
    for copy in range(scale):
        for name, entry in dump["data"].items():
            base, count, direction = name.rsplit(".", 2)
            data[f"{base}.{int(count) + 1000 * copy}.{direction}"] = entry
    out.mkdir(parents=True, exist_ok=True)
    (out / "dump.json").write_text(json.dumps({**dump, "data": data}))
    return out


def timed_check(dump: Path, out: Path, workers: int, dtype: str) -> dict:
    done = subprocess.run([sys.executable, "-c", TIMED, str(dump), str(out), str(workers), dtype],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def wall_check(dump: Path, out: Path, workers: int, dtype: str) -> float:
    args = [*PROBE, "acc-check", "-api_info", str(dump), "-o", str(out), "--workers", str(workers)]
    start = time.perf_counter()
    subprocess.run(args + (["--dtype", dtype] if dtype else []), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=1, help="which step's dump to check (default 1)")
    parser.add_argument("--scale", type=int, default=10, help="repeat the step's API calls this often (default 10)")
    parser.add_argument("--dtype", default="", help="run floating inputs in this dtype (default: as recorded)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration; the median is shown")
    parser.add_argument("--workdir", help="keep the dump and results here (default: a temporary folder)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="acc_check_speed_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        step = collect(workdir) / f"step{args.step}" / "rank0"
        dump = scaled(step, args.scale, workdir / "scaled")
        print(f"demo L1 dump {step}, its API calls x{args.scale} ({os.cpu_count()} CPUs)")
        for workers in (1, 2):
            runs = [timed_check(dump, workdir / f"out_{workers}_{i}", workers, args.dtype) for i in range(args.repeat)]
            walls = [wall_check(dump, workdir / f"wall_{workers}_{i}", workers, args.dtype) for i in range(args.repeat)]
            seconds = statistics.median(run["seconds"] for run in runs)
            apis, skipped = runs[0]["apis"], runs[0]["skipped"]
            print(f"workers={workers}: {apis} APIs ({apis - skipped} run, {skipped} skipped) in {seconds:.2f} s "
                  f"= {apis / seconds:.1f} APIs/s checked; whole command {statistics.median(walls):.2f} s wall "
                  f"(median of {args.repeat})")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
