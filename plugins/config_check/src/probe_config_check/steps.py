"""Per-step live collections: one record per forward call of the model (a micro-step, as msprobe counts).

The ``weights`` and ``dataset`` checkers both record at a forward pre-hook of
the model, for the first ``config_check.steps`` calls (default 5; the older
name ``dataset_steps`` is still read). Step ``N`` holds what the model had or
received just before its ``N``-th forward call, so a change in the learning
rate alone shows in the weights of step 1. Each recorded step asks
``ConfigChecker`` to rewrite the pack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from probe_core.api import CheckError, CheckRow

DEFAULT_STEPS = 5

#: what one step records: (forward args, forward kwargs) -> JSON-able data
Recorder = Callable[[Any, Any], dict[str, Any]]


def max_steps(options: Mapping[str, Any]) -> int:
    """How many forward calls to record, from ``config_check.steps`` (or its older name ``dataset_steps``)."""
    key = "steps" if "steps" in options else "dataset_steps"
    value = options.get(key, DEFAULT_STEPS)
    if type(value) is not int or value < 1:
        raise CheckError(f'config.json: key "config_check.{key}" is {value!r}; give a whole number of forward '
                         "calls to record, at least 1 (default 5)")
    return value


class ForwardSteps:
    """A live collection: a forward pre-hook that records the first ``limit`` forward calls."""

    def __init__(self, model: Any, limit: int, record: Recorder) -> None:
        self.limit, self.record = limit, record
        self.steps: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self._flush: Callable[[], None] | None = None
        self._lock = threading.Lock()
        first = model[0] if isinstance(model, (list, tuple)) else model
        self._handle = self._register(first)

    def _register(self, module: Any) -> Any:
        try:
            return module.register_forward_pre_hook(self._torch_hook, with_kwargs=True)
        except TypeError:  # MindSpore cells: hook(cell, inputs)
            return module.register_forward_pre_hook(lambda cell, inputs: self.on_forward(inputs, {}))

    def _torch_hook(self, module: Any, args: Any, kwargs: Any) -> None:
        self.on_forward(args, kwargs)

    def on_forward(self, args: Any, kwargs: Any) -> None:
        with self._lock:
            if self.calls >= self.limit:
                self._remove()
                return
            self.steps[str(self.calls)] = self.record(args, kwargs)
            self.calls += 1
        if self._flush is not None:
            self._flush()

    def _remove(self) -> None:
        if self._handle is not None and hasattr(self._handle, "remove"):
            self._handle.remove()
            self._handle = None

    def bind(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"steps": {k: dict(v) for k, v in self.steps.items()}}


def compare_steps(bench: Mapping[str, Any], target: Mapping[str, Any],
                  compare_one: Callable[[Any, Any, str], list[CheckRow]]) -> list[CheckRow]:
    """Rows of every step both sides recorded (``compare_one(b, t, "step N / ")``); a step one side lacks
    is noted, not failed (the runs simply lasted a different number of steps)."""
    b_steps, t_steps = bench.get("steps", {}), target.get("steps", {})
    rows = []
    for step in sorted(set(b_steps) & set(t_steps), key=int):
        rows += compare_one(b_steps[step], t_steps[step], f"step {step} / ")
    for step in sorted(set(b_steps) ^ set(t_steps), key=int):
        side = "bench" if step not in b_steps else "target"
        rows.append(CheckRow(f"step {step}", step in b_steps, step in t_steps, True,
                             f"not recorded in {side} (fewer steps ran); not compared"))
    return rows
