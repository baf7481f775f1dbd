"""Step-time overhead of collection, as ratios to training with no tool, measured in one run.

The modes run in subprocesses (so no hook outlives its mode; tensor mode in its own) on the same
CPU transformer (fwd + bwd + AdamW, every step dumped), one thread, and the
median step time after warm-up is compared with the no-tool median. Modes:
``none``, ``idle`` (probe imported and a debugger created, never started),
``L0``/``L1``/``mix`` statistics, ``md5`` and ``tensor`` (mix), all with start()/stop() around the whole
step; ``run-L0``/``run-L1``/``run-mix``: the collector ``probe run`` installs (steps end at
``optimizer.step()``, each starting at its first forward), started and stopped outside the timed step so
that its rounds interleave with the others'. When
``msprobe`` (mindstudio-probe) is importable, the same model runs under it and
its ratios print beside probe's.

    .venv/bin/python benchmarks/dump_overhead.py [--hidden 1024 --layers 4 --batch 16 --seq 128 --steps 20]

Tensor mode writes ~1 GB a step, and its ratios depend on the page cache it meets: with the cache already
full of other files (11 GB after a 15 GiB compare benchmark, 2026-11-27), reclaiming it made probe 6.5x and
msprobe 13.8x; the same code after ``sync; echo 3 > /proc/sys/vm/drop_caches`` gave 4.3x and 11.9x.
The last line gives tensor mode's I/O floor, measured in its process after its steps: the CPU time of writing
files of the sizes of its last step, one open, write and close each, as a share of the step. On the 2-core box
it ranged from +0.97 to +1.68 of a step (the kernel's page-cache work varies with what is dirty and cached).

The cost of journaling every record before the next top-level call returns (issue 11, item 5), measured
with ``--hidden 256 --layers 4 --batch 8 --seq 64 --steps 25`` on the busy 2-core box, CPU ratios, runs of
the old policy (a flush per top-level module or per 128 entries) alternating with the new one: L0
1.33x -> 1.29-1.34x, L1 1.60x -> 1.82-1.87x, mix 1.77x -> 1.81-1.83x, tensor 13.5x -> 13.8x. L1 pays
most (every API call is top-level there); flushing at every call, handed to the writer thread, cost
2.16x at L1; journaling on the training thread (no hand-off) and one flush per pair of top-level API
calls brought it to the figures above.

Recording the optimizer update and the calls inside ``loss.backward()`` under ``probe run`` (issue 33), with
``--hidden 256 --steps 10`` on the busy 2-core box, CPU ratios, two runs each: before, ``run-L1`` 1.32x and 1.35x
against ``L1`` 1.63x and 1.62x, ``run-mix`` 1.47x and 1.42x against ``mix`` 1.63x and 1.63x (start()/stop()
around the step records the update; probe run did not); after, ``run-L1`` 1.22x and 1.33x against ``L1`` 1.22x
and 1.31x, ``run-mix`` 1.31x and 1.20x against ``mix`` 1.28x and 1.24x. The update (AdamW: nine entries per
parameter, 50 parameters) costs about 0.2 of a step at L1 and mix; L0 records no API calls and is unchanged.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = {
    "none": None,
    "idle": None,
    "L0": {"level": "L0"},
    "L1": {"level": "L1"},
    "mix": {"level": "mix"},
    "md5": {"level": "mix", "summary_mode": "md5"},
    "tensor": {"level": "mix", "task": "tensor"},
    "run-L0": {"level": "L0"},
    "run-L1": {"level": "L1"},
    "run-mix": {"level": "mix"},
}
MSPROBE_MODES = ("L0", "L1", "mix", "md5", "tensor")


def build_model(hidden: int, layers: int):
    """A pre-norm transformer written with explicit torch calls (as the msprobe fixture's model)."""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    heads = max(1, hidden // 64)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // heads), dim=-1)
            x = x + self.proj(torch.matmul(att, v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(hidden, 10)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(dim=1))

    return Net()


def _setup(args: argparse.Namespace):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model(args.hidden, args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.seq, args.hidden)
    y = torch.randint(0, 10, (args.batch,))
    return model, optimizer, x, y


def _step(model, optimizer, x, y, debugger=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process — every thread, the writer's too) of one step."""
    import torch.nn.functional as F

    if isinstance(debugger, RunCollector):
        return debugger.step(model, optimizer, x, y)
    start, cpu = time.perf_counter(), time.process_time()
    if debugger is not None:
        debugger.start(model)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if debugger is not None:
        debugger.stop()
        debugger.step()
        session = getattr(debugger, "session", None)
        if session is not None:
            session.wait()  # the writer thread's work counts in this step, not in the next mode's
    return time.perf_counter() - start, time.process_time() - cpu


class RunCollector:
    """The collector of ``probe run`` (``auto_step``: the optimizer update ends the step), installed only for
    its own rounds (started before, stopped after the timed step) so that the other modes run without it."""

    def __init__(self, dump: Path, options: dict) -> None:
        from probe_core.collect.debugger import build_collector

        self.collector = build_collector("pytorch", None, auto_step=True, dump_path=str(dump), **options)

    def step(self, model, optimizer, x, y) -> tuple[float, float]:
        import torch.nn.functional as F

        self.collector.start(None, from_first_forward=True)
        start, cpu = time.perf_counter(), time.process_time()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # the step ends here
        self.collector.session.wait()
        spent = time.perf_counter() - start, time.process_time() - cpu
        self.collector.stop()
        return spent

    def close(self) -> None:
        self.collector.close()


def _dir_size(path: Path) -> int:
    """Bytes on disk: a hard-linked file (a tensor saved twice, unchanged) counts once."""
    files = {(s.st_dev, s.st_ino): s.st_size for p in path.rglob("*") if p.is_file() for s in [p.stat()]} \
        if path.exists() else {}
    return sum(files.values())


def _file_sizes(path: Path) -> list[int]:
    """The size of each tensor file of the newest step under ``path`` (a hard link counts once)."""
    steps = sorted((p for p in path.rglob("step*") if p.is_dir() and p.name[4:].isdigit()),
                   key=lambda p: int(p.name[4:])) if path.exists() else []
    if not steps:
        return []
    files = {(s.st_dev, s.st_ino): s.st_size for p in steps[-1].rglob("dump_tensor_data/*") if p.is_file()
             for s in [p.stat()]}
    return list(files.values())


def write_floor(sizes: list[int], folder: Path, rounds: int = 3) -> float:
    """CPU seconds (median of ``rounds``) of writing files of ``sizes`` bytes into one new folder, each with one
    open, one write and one close: what the bytes of a tensor step cost the kernel alone, whoever writes them."""
    import torch

    data = torch.randn(max(sizes, default=0) // 4 + 1).numpy().tobytes()
    spent = []
    for round_ in range(rounds):
        target = folder / f"floor{round_}"
        target.mkdir(parents=True)
        start = time.process_time()
        for i, size in enumerate(sizes):
            fd = os.open(target / f"{i}.pt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                os.write(fd, memoryview(data)[:size])
            finally:
                os.close(fd)
        spent.append(time.process_time() - start)
        shutil.rmtree(target)
    return statistics.median(spent)


def _prune_steps(path: Path) -> int:
    """Delete every step folder but the newest (which a writer may still fill); return their bytes. Tensor mode
    writes ~1 GB a step: kept, the files fill the page cache and the reclaim then slows every later step of
    every mode in the process (and msprobe's likewise)."""
    steps = sorted((p for p in path.rglob("step*") if p.is_dir() and p.name[4:].isdigit()),
                   key=lambda p: int(p.name[4:])) if path.exists() else []
    size = 0
    for folder in steps[:-1]:
        size += _dir_size(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return size


class JournalClock:
    """CPU time each probe mode spends journaling its records (JSON text of every batch appended to the
    step's journal, on whichever thread does it) and writing the step's final files."""

    def __init__(self) -> None:
        self.mode = ""
        self.spent: dict[str, list[float]] = {}

    def install(self) -> None:
        from probe_core.collect import writer

        clock = self

        def timed(original):
            def run(*args, **kwargs):
                start = time.thread_time()
                try:
                    return original(*args, **kwargs)
                finally:
                    clock.spent.setdefault(clock.mode, [0.0])[-1] += time.thread_time() - start
            return run

        writer.StepWriter._write_batch = timed(writer.StepWriter._write_batch)
        writer.write_step_files = timed(writer.write_step_files)

    def step(self, mode: str) -> None:
        self.mode = mode
        self.spent.setdefault(mode, [0.0]).append(0.0)


def worker(args: argparse.Namespace) -> None:
    """Print JSON {mode: {median, bytes_per_step}} for the modes of one tool, interleaved step by step.

    ``--tool none``: no probe import at all. ``--tool probe``: every probe mode gets its own
    debugger; each round runs one step of every mode (rotating the order), so all modes see the
    same machine load; ``idle`` steps run with probe imported and debuggers created, none started.
    ``--tool msprobe``: one msprobe mode per process (it patches globally).
    """
    model, optimizer, x, y = _setup(args)
    dump = Path(args.dump)
    modes = args.mode.split(",")
    debuggers: dict[str, object] = {}
    journal = JournalClock()
    if args.tool == "probe":
        from probe_torch import PrecisionDebugger

        journal.install()
        for mode in modes:
            if mode.startswith("run-"):
                debuggers[mode] = RunCollector(dump / mode, MODES[mode])
                continue
            debuggers[mode] = PrecisionDebugger(dump_path=str(dump / mode), **MODES[mode]) if MODES.get(mode) else None
    elif args.tool == "msprobe":
        from msprobe.pytorch import PrecisionDebugger as MsDebugger

        options = MODES[modes[0]]
        task = options.get("task", "statistics")
        section = {"scope": [], "list": [], "data_mode": ["all"]}
        if task == "statistics":
            section["summary_mode"] = options.get("summary_mode", "statistics")
        dump.mkdir(parents=True, exist_ok=True)
        config = dump / "config.json"
        config.write_text(json.dumps({"task": task, "dump_path": str(dump / modes[0]), "rank": [], "step": [],
                                      "level": options["level"], task: section}))
        debuggers[modes[0]] = MsDebugger(config_path=str(config))
    else:
        debuggers = dict.fromkeys(modes)
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    written = dict.fromkeys(modes, 0)
    rounds = args.warmup + args.steps
    for round_ in range(rounds):
        order = modes[round_ % len(modes):] + modes[:round_ % len(modes)]
        for mode in order:
            journal.step(mode)
            wall, used = _step(model, optimizer, x, y, debuggers[mode])
            times[mode].append(wall)
            cpu[mode].append(used)
            written[mode] += _prune_steps(dump / mode)
    for debugger in debuggers.values():
        if debugger is not None and hasattr(debugger, "close"):
            debugger.close()
    floors = {mode: write_floor(_file_sizes(dump / mode), dump / "floor") for mode in modes
              if args.tool == "probe" and mode == "tensor"}
    print(json.dumps({mode: {"write_floor": floors.get(mode, 0.0),
                             "median": statistics.median(times[mode][args.warmup:]),
                             "cpu": statistics.median(cpu[mode][args.warmup:]),
                             "journal": statistics.median(journal.spent.get(mode, [0.0] * rounds)[1:][args.warmup:]
                                                          or [0.0]),
                             "bytes_per_step": (written[mode] + _dir_size(dump / mode)) / rounds} for mode in modes}))


def run_modes(args: argparse.Namespace, tool: str, modes: list[str]) -> dict:
    dump = Path(tempfile.mkdtemp(prefix=f"bench-{tool}-"))
    python = args.msprobe_python if tool == "msprobe" and args.msprobe_python else sys.executable
    command = [python, __file__, "--worker", "--tool", tool, "--mode", ",".join(modes), "--dump", str(dump)]
    for key in ("hidden", "layers", "batch", "seq", "steps", "warmup"):
        command += [f"--{key}", str(getattr(args, key))]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    except subprocess.CalledProcessError as exc:
        return {mode: {"error": ((exc.stderr or "").strip().splitlines() or ["failed"])[-1]} for mode in modes}
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _size(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of: " + ", ".join(MODES))
    parser.add_argument("--no-msprobe", action="store_true", help="do not run msprobe even when installed")
    parser.add_argument("--msprobe-python", metavar="PYTHON",
                        help="interpreter of a separate venv where msprobe (and the same torch) is installed")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tool", default="probe", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--dump", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    modes = [m for m in args.modes.split(",") if m and m != "none"]
    with_msprobe = not args.no_msprobe and (bool(args.msprobe_python) or importlib.util.find_spec("msprobe") is not None)
    print(f"model: hidden {args.hidden}, {args.layers} layers, batch {args.batch}, seq {args.seq}; "
          f"{args.steps} timed steps after {args.warmup} warm-up; 1 thread; every step dumped")
    plain = run_modes(args, "none", ["none"])["none"]
    # tensor mode (a GB of files a step) runs in a process of its own, beside idle steps of its own, so its
    # writes cannot slow the other modes' steps; each mode's ratio is to the idle steps of its process
    light = [m for m in modes if m not in ("idle", "tensor")]
    ours, idle_of = {}, {}
    for group in (["idle"] + light, ["idle", "tensor"] if "tensor" in modes else []):
        if len(group) < 2 and group != ["idle"]:
            continue
        results = run_modes(args, "probe", group)
        for mode in group[1:]:
            ours[mode], idle_of[mode] = results[mode], results["idle"]
        ours.setdefault("idle", results["idle"])
    if "error" in plain or "error" in ours["idle"]:
        sys.exit(f"baseline failed: {plain.get('error') or ours['idle'].get('error')}")
    base, base_cpu = ours["idle"]["median"], ours["idle"]["cpu"]  # same process, same rounds
    print(f"no tool: {plain['median'] * 1000:.1f} ms/step wall, {plain['cpu'] * 1000:.1f} ms CPU (separate "
          f"process); probe imported, not started: {base * 1000:.1f} ms wall, {base_cpu * 1000:.1f} ms CPU")
    print("ratios to no tool: CPU time of the whole process (robust on a busy machine) and wall time; journal: "
          "CPU time of journaling the records and writing the step files, as a share of the no-tool step")
    header = f"{'mode':8} {'probe cpu':>9} {'wall':>6} {'journal':>7} {'bytes/step':>11}"
    print(header + (f" {'msprobe cpu':>11} {'wall':>6} {'bytes/step':>11}" if with_msprobe else ""))
    print(f"{'idle':8} {base_cpu / plain['cpu']:8.2f}x {base / plain['median']:5.2f}x {'':>7} {'0 B':>11}"
          "   (vs the no-tool process)")
    for mode in modes:
        if mode == "idle":
            continue
        result, idle = ours[mode], idle_of[mode]
        line = f"{mode:8} " + (f"{result['cpu'] / idle['cpu']:8.2f}x {result['median'] / idle['median']:5.2f}x "
                               f"{result['journal'] / idle['cpu']:6.1%} {_size(result['bytes_per_step']):>11}"
                               if "error" not in result else f"error: {result['error']}")
        if with_msprobe and mode in MSPROBE_MODES:
            theirs = run_modes(args, "msprobe", [mode])[mode]
            line += (f" {theirs['cpu'] / plain['cpu']:10.2f}x {theirs['median'] / plain['median']:5.2f}x "
                     f"{_size(theirs['bytes_per_step']):>11}"
                     if "error" not in theirs else f"  msprobe error: {theirs['error']}")
        print(line, flush=True)
    if "tensor" in modes and "error" not in ours["tensor"]:
        floor = ours["tensor"]["write_floor"] / idle_of["tensor"]["cpu"]
        print(f"tensor's I/O floor: writing the same files alone (open, write, close; no tool, no copy, no CRC) costs "
              f"+{floor:.2f} of a step's CPU: no tool can write them under {1 + floor:.2f}x")


if __name__ == "__main__":
    main()
