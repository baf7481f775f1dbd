"""MindSpore collection overhead: train steps of the msprobe-fixture network with and without probe.

Run: ``.venv/bin/python benchmarks/mindspore_overhead.py [STEPS [ROUNDS]]`` (default 5 steps, 3 rounds).
Prints the CPU time (this process, all threads: MindSpore's worker threads included) and the wall time per
step for the plain run and for statistics at L0, L1 and mix, and each ratio to the plain run, all measured
in this one process. Each run times each of its steps after the first (the training loop builds and compiles
its optimizer, 0.4-0.8 s, before it), the runs alternate (plain, L0, L1, mix, then again) and each figure is
the least step of all its rounds: a burst of load on the machine (it also inflates the CPU time of the process
it preempts, through caches and the hypervisor) lasts whole steps, so the least step is the one it spared,
and no configuration takes more of the bursts than another. On a loaded machine the CPU ratios are the ones
to read: wall time counts the other processes' turns too.

Where L0's cost goes (issue 36, measured 2026-12-07 on the 2-core box at a load of 8-11, main-thread CPU time,
the least of 15 steps; plain step about 40 ms): probe's Python is about 9 ms a step (20 cell calls: 17 recorded
cells with their 26 parameters; about 126 tensors' statistics, 7 journal appends), and MindSpore's own work for
the hooks adds about 4 ms: each ``Tensor.register_hook`` costs about 45 us of forward and backward dispatch and
each identity view about 80 us (a chain of 40 matmuls under ``value_and_grad``: plain 21.2 ms, a hook on each
output 22.9 ms, a view on each 24.4 ms, both 25.1 ms). At mix the views (about 130 a step) and hooks (about 240)
cost some 20 ms of a step. The statistics are fetched once per batch: CPU tensors' from their memory by the
fused kernel, accelerator tensors' by MindSpore ops stacked and fetched with one ``asnumpy`` per dtype.
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
    """The least (CPU seconds, wall seconds) of one step, among the steps after the first."""
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
        steps_after_first = list(zip(marks, marks[1:]))  # no optimizer compile in them
        return (min(cpu_end - cpu for (cpu, _), (cpu_end, _) in steps_after_first),
                min(wall_end - wall for (_, wall), (_, wall_end) in steps_after_first))


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
    print(f"{steps} steps, least step of {rounds} alternated rounds")
    print(f"plain           {plain_cpu * 1000:8.1f} ms CPU/step  {plain_wall * 1000:8.1f} ms wall/step")
    for level in LEVELS[1:]:
        cpu, wall = best[level]
        print(f"statistics {level:4} {cpu * 1000:8.1f} ms CPU/step  {wall * 1000:8.1f} ms wall/step  "
              f"({cpu / plain_cpu:5.2f}x CPU, {wall / plain_wall:5.2f}x wall)")


if __name__ == "__main__":
    main()
