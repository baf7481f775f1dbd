"""MindSpore collection overhead: train steps of the msprobe-fixture network with and without probe.

Run: ``.venv/bin/python benchmarks/mindspore_overhead.py [STEPS [ROUNDS]]`` (default 5 steps, 3 rounds).
Prints the CPU time (this process, all threads: MindSpore's worker threads included) and the wall time per
step for the plain run and for statistics at L0, L1 and mix, and each ratio to the plain run, all measured
in this one process. Each run times its steps after the first (the training loop builds and compiles its
optimizer, 0.4-0.8 s, before it), the runs alternate (plain, L0, L1, mix, then again) and each figure is the
least of its rounds, so a burst of load on the machine weighs on no single configuration. On a loaded machine the CPU ratios are the ones to read: wall time counts the other
processes' turns too.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "mindspore"))

import mindspore as ms  # noqa: E402
import ms_net  # noqa: E402

from probe_mindspore import PrecisionDebugger  # noqa: E402


def per_step(steps: int, level: str | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per step."""
    ms.set_seed(0)
    net = ms_net.Net()
    ms_net.train(net, 1)  # warm-up (kernel selection, parameter init)
    with tempfile.TemporaryDirectory() as out:
        debugger = None
        if level is not None:
            debugger = PrecisionDebugger(dump_path=out, task="statistics", level=level)
            debugger.start(net)
        marks: list[tuple[float, float]] = []

        def step_done() -> None:
            if debugger is not None:
                debugger.step()
            marks.append((time.process_time(), time.perf_counter()))

        ms_net.train(net, steps, on_step=step_done)  # builds its optimizer (compiled: 0.4-0.8 s) before step 0
        if debugger is not None:
            debugger.close()
        (cpu, wall), (cpu_end, wall_end) = marks[0], marks[-1]  # the steps after the first: no compile in them
        return (cpu_end - cpu) / (steps - 1), (wall_end - wall) / (steps - 1)


LEVELS = (None, "L0", "L1", "mix")


def main() -> None:
    steps = max(2, int(sys.argv[1])) if len(sys.argv) > 1 else 5
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runs: dict[str | None, list[tuple[float, float]]] = {level: [] for level in LEVELS}
    for _ in range(rounds):
        for level in LEVELS:
            runs[level].append(per_step(steps, level))
    best = {level: (min(cpu for cpu, _ in got), min(wall for _, wall in got)) for level, got in runs.items()}
    plain_cpu, plain_wall = best[None]
    print(f"{steps} steps, least of {rounds} alternated rounds")
    print(f"plain           {plain_cpu * 1000:8.1f} ms CPU/step  {plain_wall * 1000:8.1f} ms wall/step")
    for level in LEVELS[1:]:
        cpu, wall = best[level]
        print(f"statistics {level:4} {cpu * 1000:8.1f} ms CPU/step  {wall * 1000:8.1f} ms wall/step  "
              f"({cpu / plain_cpu:5.2f}x CPU, {wall / plain_wall:5.2f}x wall)")


if __name__ == "__main__":
    main()
