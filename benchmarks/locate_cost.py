"""What ``probe locate`` costs against one full mix dump of the same steps (both runs, then ``probe compare``).

    python benchmarks/locate_cost.py [--model blocks|tiny] [--steps N] [--script-steps S] [--bug-from K]
                                     [--parallel] [--split] [--plain]

``blocks`` (default): tests/locate/train_blocks.py, 4 pre-norm transformer blocks of hidden 512 (batch 4, 128
tokens: a step costs about 2 CPU seconds on the 2-core development box, against about 9 for the process start);
the script runs 20 steps, locate monitors the first 16 and the full dump records the same 16 (its run ends after
them: ``exit_after_last_step``), the bug (the first block's GELU switched to its tanh approximation) from step 10.
``tiny``: tests/locate/train_tiny.py, an 8-layer MLP of hidden 256 (batch 64), 8 steps, bug from step 5: a step
costs next to nothing against the process start.

Both ways run the bench and the target one after the other (locate's stage-1 target run ends right after the step
where it parts from the bench, the bench runs every step monitored), or with ``--parallel`` both at once (locate's
stage-1 runs both end right after the step where they part; the full dump's two runs go at the same time too).
Stage 2 compares stage 1's L0 dumps and runs no training. The script prints wall and CPU seconds (every process
it started and their children: user + sys) and bytes written, their ratios locate / full dump, each stage's share
(from locate_summary.json, with its training runs) and the culprit both name. ``--split`` then reruns stages 3 and 4
with ``--tensor-budget-mb 0`` (statistics, then the one API's tensors: two pairs of runs) on stages 1 and 2 reused,
to compare with the one pair of runs stage 3 takes by default. ``--plain`` first times the bench without probe, one
step and all steps (the process' fixed cost and a step's). ``--stage1-parts N`` only times what stage 1 adds to a
run of N steps of the bench, with one torch thread (``OMP_NUM_THREADS=1``: CPU time then counts no thread spinning
on a loaded box): plain, the monitor as stage 1 configures it, cheaper monitor configs (norms only; no Adam
moments), and an L0 dump. On a loaded machine compare CPU, not wall.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = str(Path(sys.executable).with_name("probe"))
MODELS = {  # script, its size arguments, script steps, monitored steps, bug from
    "blocks": (ROOT / "tests" / "locate" / "train_blocks.py",
               ["--hidden", "512", "--blocks", "4", "--batch", "4", "--seq", "128"], 20, 16, 10),
    "tiny": (ROOT / "tests" / "locate" / "train_tiny.py", ["--hidden", "256", "--layers", "8", "--batch", "64"], 8, 8, 5),
}


def measured(commands: list[list[str]], env: dict[str, str] | None = None,
             parallel: bool = False) -> tuple[float, float]:
    """Wall and CPU seconds of running ``commands`` one after the other, or all at once (each must succeed)."""
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    for group in [commands] if parallel else [[command] for command in commands]:
        logs = [tempfile.TemporaryFile("w+") for _ in group]  # not pipes: a full one would stall its command
        started = [subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
                   for command, log in zip(group, logs)]
        for command, process, log in zip(group, started, logs):
            if process.wait():
                log.seek(0)
                sys.exit(f"failed: {' '.join(command)}\n{log.read()[-4000:]}")
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


def row(label: str, wall: float, cpu: float, written: int, extra: str = "") -> None:
    print(f"{label:30}{wall:10.1f}{cpu:10.1f}{written:14,}{extra}", flush=True)


def stages(summary: dict) -> None:
    for name, stage in summary["stages"].items():
        runs = sum(line.startswith(("bench:", "target:")) for line in stage["ran"])
        row(f"  stage {name}", stage["seconds"], stage["cpu_seconds"], stage["bytes"], f"  ({runs} training runs)")


def stage1_parts(bench: list[str], out: Path) -> None:
    """What stage 1's monitor and L0 dump add to a plain run of ``bench``, one torch thread, each timed alone."""
    from probe_locate.settings import L0_CONFIG, MONITOR_DEFAULTS

    configs = {"monitor (stage 1's config)": ("monitor", MONITOR_DEFAULTS),
               "monitor, norms only": ("monitor", MONITOR_DEFAULTS | {"ops": ["norm"]}),
               "monitor, no Adam moments": ("monitor", MONITOR_DEFAULTS | {"mv_distribution": False}),
               "L0 dump": ("statistics", L0_CONFIG)}
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    row("plain", *measured([[sys.executable, *bench[1:]]], env), 0)
    for number, (label, (task, config)) in enumerate(configs.items()):
        path = out / f"config{number}.json"
        path.write_text(json.dumps(config))
        task_args = ["--task", "monitor"] if task == "monitor" else []
        run = [PROBE, "run", *task_args, "-c", str(path), "--dump-path", str(out / f"run{number}"), *bench[1:]]
        row(label, *measured([run], env), size(out / f"run{number}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="blocks")
    parser.add_argument("--steps", type=int, help="steps locate monitors and the full dump records")
    parser.add_argument("--script-steps", type=int, help="steps the script runs")
    parser.add_argument("--bug-from", type=int)
    parser.add_argument("--parallel", action="store_true", help="the bench and the target at the same time, both ways")
    parser.add_argument("--split", action="store_true", help="then stages 3 and 4 again, two pairs of runs in stage 3")
    parser.add_argument("--plain", action="store_true", help="first time the bench without probe")
    parser.add_argument("--stage1-parts", type=int, metavar="N",
                        help="only time what stage 1's monitor and L0 dump add to N steps (one torch thread)")
    args = parser.parse_args()
    script, sizes, script_steps, steps, bug = MODELS[args.model]
    script_steps, steps, bug = args.script_steps or script_steps, args.steps or steps, args.bug_from or bug
    bench = [sys.executable, str(script), *sizes, "--steps", str(script_steps)]
    target = [*bench, "--gelu-tanh-from", str(bug)]
    if args.stage1_parts:
        print(f"model {args.model}: {' '.join(sizes)}; {args.stage1_parts} steps, OMP_NUM_THREADS=1")
        print(f"{'':30}{'wall s':>10}{'CPU s':>10}{'bytes':>14}", flush=True)
        with tempfile.TemporaryDirectory(prefix="locate_stage1_") as tmp:
            stage1_parts([*bench[:-1], str(args.stage1_parts)], Path(tmp))
        return
    print(f"model {args.model}: {' '.join(sizes)}; the script runs {script_steps} steps, locate monitors {steps} and "
          f"the full dump records {steps}; bug from step {bug}; sides "
          f"{'at the same time' if args.parallel else 'one after the other'}")
    print(f"{'':30}{'wall s':>10}{'CPU s':>10}{'bytes':>14}", flush=True)
    if args.plain:
        one = measured([[*bench[:-1], "1"]])
        whole = measured([[*bench[:-1], str(steps)]])
        row("plain bench, 1 step", *one, 0)
        row(f"plain bench, {steps} steps", *whole, 0,
            f"  (a step {(whole[1] - one[1]) / (steps - 1):.2f} s CPU, the rest {one[1] - (whole[1] - one[1]) / (steps - 1):.1f} s)")
    with tempfile.TemporaryDirectory(prefix="locate_cost_") as tmp:
        out = Path(tmp)
        config = out / "full.json"
        config.write_text(json.dumps({"task": "statistics", "level": "mix", "step": list(range(steps)),
                                      "exit_after_last_step": True}))
        runs = measured([[PROBE, "run", "-c", str(config), "--dump-path", str(out / "full" / side), *command[1:]]
                         for side, command in (("bench", bench), ("target", target))], parallel=args.parallel)
        compared = measured([[PROBE, "compare", str(out / "full" / "target"), str(out / "full" / "bench"), "-o",
                              str(out / "full" / "compare")]])
        full = runs[0] + compared[0], runs[1] + compared[1]
        full_bytes = size(out / "full")
        row("full mix dump + compare", *full, full_bytes, "  (2 training runs)")
        locate = [PROBE, "locate", "--bench", " ".join(bench), "--target", " ".join(target), "--steps", str(steps),
                  *(["--parallel"] if args.parallel else [])]
        located = measured([[*locate, "-o", str(out / "locate")]])
        locate_bytes = size(out / "locate")
        culprit = json.loads((out / "full" / "compare" / "summary.json").read_text())["first_divergence"]
        summary = json.loads((out / "locate" / "locate_summary.json").read_text())
        row("probe locate, all stages", *located, locate_bytes)
        stages(summary)
        print(f"ratios locate/full: wall {located[0] / full[0]:.2f}x, CPU {located[1] / full[1]:.2f}x, bytes "
              f"{locate_bytes / max(full_bytes, 1):.3f}x")
        found = summary["stages"].get("mix", {}).get("finding", {}).get("name")
        print(f"culprit: full dump {culprit['name']} (step {culprit['step']}); locate {found}; answer: "
              f"{(summary['answer'] or {}).get('kind')}")
        if args.split:
            split = out / "split"
            split.mkdir()
            for folder in ("stage1-monitor", "stage2-l0"):
                shutil.copytree(out / "locate" / folder, split / folder, symlinks=True)
            again = measured([[*locate, "-o", str(split), "--tensor-budget-mb", "0"]])
            summary = json.loads((split / "locate_summary.json").read_text())
            row("stages 3-4 split (reused 1-2)", *again, size(split / "stage3-mix") + size(split / "stage4-replay"))
            stages({"stages": {k: v for k, v in summary["stages"].items() if k in ("mix", "replay")}})
            print(f"culprit, split: {summary['stages']['mix']['finding'].get('name')}; answer: "
                  f"{(summary['answer'] or {}).get('kind')}")


if __name__ == "__main__":
    main()
