"""What ``probe locate`` costs against one full mix dump of the same steps (both runs, then ``probe compare``).

    python benchmarks/locate_cost.py [--hidden 256] [--layers 8] [--batch 64] [--steps 8] [--bug-from 5]

The training script is tests/locate/train_tiny.py (an MLP; the target's first GELU switches to its tanh
approximation from step ``--bug-from``). Both ways run the bench and the target one after the other; the script
prints wall and CPU seconds (this process' children: user + sys) and bytes written, and their ratios
locate / full dump, each stage's share (from locate_summary.json) and the culprit both name. On a loaded
machine compare CPU, not wall. ``--steps`` is both the script's length and the steps stage 1 monitors (the
full dump records the same steps).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "locate" / "train_tiny.py"
PROBE = str(Path(sys.executable).with_name("probe"))


def measured(commands: list[list[str]]) -> tuple[float, float]:
    """Wall and CPU seconds of running ``commands`` one after the other (each must succeed)."""
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"failed: {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def size(folder: Path) -> int:
    seen, total = set(), 0
    for path in folder.rglob("*"):
        info = path.lstat()
        if path.is_file() and (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--bug-from", type=int, default=5)
    args = parser.parse_args()
    model = [str(SCRIPT), "--steps", str(args.steps), "--hidden", str(args.hidden), "--layers", str(args.layers),
             "--batch", str(args.batch)]
    bench, target = [sys.executable, *model], [sys.executable, *model, "--gelu-tanh-from", str(args.bug_from)]
    with tempfile.TemporaryDirectory(prefix="locate_cost_") as tmp:
        out = Path(tmp)
        full = measured([[PROBE, "run", "--level", "mix", "--dump-path", str(out / "full" / side), *command[1:]]
                         for side, command in (("bench", bench), ("target", target))]
                        + [[PROBE, "compare", str(out / "full" / "target"), str(out / "full" / "bench"), "-o",
                            str(out / "full" / "compare")]])
        full_bytes = size(out / "full")
        located = measured([[PROBE, "locate", "--bench", " ".join(bench), "--target", " ".join(target), "--steps",
                             str(args.steps), "-o", str(out / "locate")]])
        locate_bytes = size(out / "locate")
        culprit = json.loads((out / "full" / "compare" / "summary.json").read_text())["first_divergence"]
        answer = json.loads((out / "locate" / "locate_summary.json").read_text())
        found = answer["stages"].get("mix", {}).get("finding", {}).get("name")
    print(f"model: {args.layers} hidden layers of {args.hidden}, batch {args.batch}, {args.steps} steps, bug from step "
          f"{args.bug_from}")
    print(f"{'':24}{'wall s':>10}{'CPU s':>10}{'bytes':>14}")
    print(f"{'full mix dump+compare':24}{full[0]:10.1f}{full[1]:10.1f}{full_bytes:14,}")
    print(f"{'probe locate (4 stages)':24}{located[0]:10.1f}{located[1]:10.1f}{locate_bytes:14,}")
    print(f"ratios locate/full: wall {located[0] / full[0]:.2f}x, CPU {located[1] / full[1]:.2f}x, bytes "
          f"{locate_bytes / max(full_bytes, 1):.3f}x")
    for name, stage in answer["stages"].items():
        processes = sum(line.startswith(("bench:", "target:")) for line in stage["ran"])
        print(f"  stage {name:8}{stage['seconds']:10.1f}{stage['cpu_seconds']:10.1f}{stage['bytes']:14,}"
              f"  ({processes} training runs)")
    print(f"culprit: full dump {culprit['name']} (step {culprit['step']}); locate {found}; answer: "
          f"{(answer['answer'] or {}).get('kind')}")


if __name__ == "__main__":
    main()
