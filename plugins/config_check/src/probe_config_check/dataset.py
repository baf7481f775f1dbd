"""Checker ``dataset``: statistics of the batches the model receives, per micro-step and rank.

A forward pre-hook on the model (:class:`~probe_config_check.steps.ForwardSteps`)
records max/min/mean/norm of every tensor argument of the first
``config_check.steps`` (default 5) forward calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe_core.api import CheckContext, CheckRow

from probe_config_check.steps import ForwardSteps, compare_steps, max_steps
from probe_config_check.tensor_stats import is_tensor, tensor_stats
from probe_config_check.weights import compare_stats


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


def batch_stats(args: Any, kwargs: Any) -> dict[str, Any]:
    """Statistics of every tensor in one forward call's arguments, by path."""
    found = {**tensors_in(tuple(args), "args"), **tensors_in(dict(kwargs or {}), "kwargs")}
    return {name: tensor_stats(t) for name, t in found.items()}


def collect(ctx: CheckContext) -> ForwardSteps | None:
    if ctx.model is None:
        return None
    return ForwardSteps(ctx.model, max_steps(ctx.options), batch_stats)


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    return compare_steps(bench, target, compare_stats)
