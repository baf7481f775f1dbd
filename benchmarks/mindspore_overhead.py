"""MindSpore collection overhead: train steps of the msprobe-fixture network with and without probe.

Run: ``.venv/bin/python benchmarks/mindspore_overhead.py [STEPS [ROUNDS]]`` (default 5 steps, 3 rounds).
Prints, per step, the CPU time of this process (all threads: MindSpore's worker threads and probe's writer
thread included), the CPU time of the main (training) thread, and the wall time, for the plain run and for
statistics at L0, L1 and mix, and each ratio to the plain run, all measured in this one process. Each run
times each of its steps after the first (the training loop builds and compiles its optimizer, 0.4-0.8 s,
before it), the runs alternate (plain, L0, L1, mix, then again) and each figure is the least step of all its
rounds: a burst of load on the machine (it also inflates the CPU time of the process it preempts, through
caches and the hypervisor) lasts whole steps, so the least step is the one it spared, and no configuration
takes more of the bursts than another. On a loaded machine the CPU ratios are the ones to read (wall time
counts the other processes' turns too), and even they move by 0.2-0.3x from run to run at a load of 5-8 on
the 2-core box: compare two versions only over several runs of each, alternated, or by what
``.venv/bin/python benchmarks/mindspore_overhead.py counts`` prints instead, which no load moves: what one
recorded step asks at each level (identity views, tensor hooks, parameter hooks, Python calls into probe).

Where the cost goes (issue 36; plain step about 40 ms of main-thread CPU):

* MindSpore's work for the hooks sets a floor. Measured on a chain of 40 matmuls under ``value_and_grad``
  (the least of 60 steps, alternated): an identity view with its ``register_hook`` costs about 110-130 us of
  forward and backward dispatch, a ``register_hook`` on an op's output about 50 us, a ``Parameter`` hook
  about 40 us (26 of them: 1.0 ms a step). L0 catches each recorded cell's input gradient with a view and
  its output gradient with a hook: 17 views, 19 output hooks and 26 parameter hooks a step, about 4 ms,
  i.e. 1.10x before probe runs a line of Python. At mix the 100 recorded calls a step take 131 views
  and 105 output hooks: about 22 ms, i.e. 1.55x from the hooks alone. L0 <= 1.1x and mix <= 1.5x are out of
  reach while gradients are caught per call with views (a view gives the gradient w.r.t. this call's use
  of a tensor, which a hook on the tensor itself does not; MindSpore 2.10's ``Tensor._grad_node`` hooks see
  only the last op of a composite call).
* probe's Python (``counts``): 3,739 Python function calls into probe a step at L0, 15,995 at L1 and
  18,829 at mix (4,216, 17,386 and 20,440 before the per-tensor path lost its extra calls: one dtype lookup
  and the statistics helpers); some 4-5 ms at L0 on a quiet machine, up to twice that when MindSpore's
  kernels between the calls leave the caches cold. L0's step: 20 cell calls with 126 tensors' statistics,
  19 backward and 13 ``parameters_grad`` entries, 7 journal appends. Nine calls are per tensor (the encoder,
  is_tensor, the data mode and its extend, describe, requires_grad, stats, the kernel's wrapper, the batch);
  the largest shared item left is the stack capture's per-frame ``_skipped`` (269 calls a step at L0, 1,848
  at mix).

The statistics are fetched once per batch: CPU tensors' from their memory by the fused kernel, accelerator
tensors' by MindSpore ops stacked and fetched with one ``asnumpy`` per dtype.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "mindspore"))

import mindspore as ms  # noqa: E402
import ms_net  # noqa: E402
import probe_mindspore.collector as collector_module  # noqa: E402

from probe_mindspore import PrecisionDebugger  # noqa: E402


def per_step(steps: int, level: str | None) -> tuple[float, float, float]:
    """The least (process CPU, main-thread CPU, wall) seconds of one step, among the steps after the first."""
    ms.set_seed(0)
    net = ms_net.Net()
    ms_net.train(net, 1)  # warm-up (kernel selection, parameter init)
    with tempfile.TemporaryDirectory() as out:
        debugger = None
        if level is not None:
            debugger = PrecisionDebugger(dump_path=out, task="statistics", level=level)
            debugger.start(net)
        marks: list[tuple[float, float, float]] = []

        def step_done() -> None:
            if debugger is not None:
                debugger.step()
            marks.append((time.process_time(), time.thread_time(), time.perf_counter()))

        ms_net.train(net, steps, on_step=step_done)  # builds its optimizer (compiled: 0.4-0.8 s) before step 0
        if debugger is not None:
            debugger.close()
        steps_after_first = list(zip(marks, marks[1:]))  # no optimizer compile in them
        return tuple(min(end[i] - start[i] for start, end in steps_after_first) for i in range(3))


def work_counts(level: str) -> Counter[str]:
    """What one recorded step (the second) asks of MindSpore and of Python, which no load on the machine
    changes: identity views, tensor hooks registered during the step, parameter hooks (installed once, at
    start), and Python function calls into probe's own code (probe_core, probe_mindspore, the data modes)."""
    counts: Counter[str] = Counter()
    real_view, real_hook = collector_module._VIEW, ms.Tensor.register_hook

    def view(tensor: ms.Tensor, *shape: object) -> ms.Tensor:
        counts["views"] += 1
        return real_view(tensor, *shape)

    def register_hook(tensor: ms.Tensor, hook: object) -> object:
        counts["hooks"] += 1
        return real_hook(tensor, hook)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and "/probe_" in frame.f_code.co_filename:
            counts["probe calls"] += 1

    collector_module._VIEW, ms.Tensor.register_hook = view, register_hook
    try:
        ms.set_seed(0)
        net = ms_net.Net()
        ms_net.train(net, 1)
        with tempfile.TemporaryDirectory() as out:
            debugger = PrecisionDebugger(dump_path=out, task="statistics", level=level)
            debugger.start(net)
            parameter_hooks = counts.pop("hooks", 0)
            steps_done = []

            def step_done() -> None:
                debugger.step()
                steps_done.append(True)
                if len(steps_done) == 1:
                    counts.clear()
                    sys.setprofile(profile)
                else:
                    sys.setprofile(None)

            ms_net.train(net, 2, on_step=step_done)
            debugger.close()
    finally:
        sys.setprofile(None)
        collector_module._VIEW, ms.Tensor.register_hook = real_view, real_hook
    counts["parameter hooks"] = parameter_hooks
    return counts


LEVELS = (None, "L0", "L1", "mix")


def main() -> None:
    if sys.argv[1:2] == ["counts"]:
        for level in LEVELS[1:]:
            got = work_counts(level)
            print(f"statistics {level:4} {got['views']:4} views, {got['hooks']:4} tensor hooks a step, "
                  f"{got['parameter hooks']:3} parameter hooks, {got['probe calls']:6} Python calls into probe a step")
        return
    steps = max(2, int(sys.argv[1])) if len(sys.argv) > 1 else 5
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runs: dict[str | None, list[tuple[float, float, float]]] = {level: [] for level in LEVELS}
    for _ in range(rounds):
        for level in LEVELS:
            runs[level].append(per_step(steps, level))
    best = {level: tuple(min(got[i] for got in runs[level]) for i in range(3)) for level in LEVELS}
    plain = best[None]
    print(f"{steps} steps, least step of {rounds} alternated rounds (ms per step: process CPU, main-thread CPU, wall)")
    print(f"plain           {plain[0] * 1000:8.1f} CPU {plain[1] * 1000:8.1f} main {plain[2] * 1000:8.1f} wall")
    for level in LEVELS[1:]:
        cpu, main_cpu, wall = best[level]
        print(f"statistics {level:4} {cpu * 1000:8.1f} CPU {main_cpu * 1000:8.1f} main {wall * 1000:8.1f} wall  "
              f"({cpu / plain[0]:5.2f}x CPU, {main_cpu / plain[1]:5.2f}x main, {wall / plain[2]:5.2f}x wall)")


if __name__ == "__main__":
    main()
