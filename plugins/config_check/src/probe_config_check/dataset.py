"""Checker ``dataset``: statistics of the first batches the model receives, per micro-step and rank.

A forward pre-hook on the model records max/min/mean/norm of every tensor
argument of the first ``config_check.dataset_steps`` (default 5) forward
calls; each recorded step asks ``ConfigChecker`` to rewrite the pack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from probe_core.specs import CheckContext, CheckRow

from probe_config_check.tensor_stats import is_tensor, tensor_stats
from probe_config_check.weights import compare_stats

DEFAULT_STEPS = 5


def tensors_in(value: Any, path: str) -> dict[str, Any]:
    """Every tensor inside nested args/kwargs, named by its path (``kwargs.input_ids``, ``args.0.1``)."""
    if is_tensor(value):
        return {path: value}
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.update(tensors_in(item, f"{path}.{key}"))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            out.update(tensors_in(item, f"{path}.{i}"))
    return out


class BatchRecorder:
    """A live collection: a forward pre-hook that records the first batches."""

    def __init__(self, model: Any, max_steps: int) -> None:
        self.max_steps = max_steps
        self.steps: dict[str, dict[str, Any]] = {}
        self._flush: Callable[[], None] | None = None
        self._lock = threading.Lock()
        first = model[0] if isinstance(model, (list, tuple)) else model
        self._handle = self._register(first)

    def _register(self, module: Any) -> Any:
        try:
            return module.register_forward_pre_hook(self._torch_hook, with_kwargs=True)
        except TypeError:  # MindSpore cells: hook(cell, inputs)
            return module.register_forward_pre_hook(lambda cell, inputs: self.record(inputs, {}))

    def _torch_hook(self, module: Any, args: Any, kwargs: Any) -> None:
        self.record(args, kwargs)

    def record(self, args: Any, kwargs: Any) -> None:
        with self._lock:
            step = len(self.steps)
            if step >= self.max_steps:
                self._remove()
                return
            found = {**tensors_in(tuple(args), "args"), **tensors_in(dict(kwargs or {}), "kwargs")}
            self.steps[str(step)] = {name: tensor_stats(t) for name, t in found.items()}
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


def collect(ctx: CheckContext) -> BatchRecorder | None:
    if ctx.model is None:
        return None
    return BatchRecorder(ctx.model, int(ctx.options.get("dataset_steps", DEFAULT_STEPS)))


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    b_steps, t_steps = bench.get("steps", {}), target.get("steps", {})
    rows = []
    for step in sorted(set(b_steps) & set(t_steps), key=int):
        rows += compare_stats(b_steps[step], t_steps[step], prefix=f"step {step} / ")
    for step in sorted(set(b_steps) ^ set(t_steps), key=int):
        side = "bench" if step not in b_steps else "target"
        rows.append(CheckRow(f"step {step}", step in b_steps, step in t_steps, True,
                             f"not recorded in {side} (fewer steps ran); not compared"))
    return rows
