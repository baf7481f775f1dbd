"""Checker ``weights``: per-parameter statistics of the model, per micro-step and rank.

Step 0 is recorded when ``ConfigChecker`` is created and again just before
the first forward call; step ``N`` just before the ``N``-th forward call
(the first ``config_check.steps``, default 5), so a change in the learning
rate alone shows in step 1. Packs of probe before per-step weights hold
``{"parameters": ...}``: read as step 0.
"""

from __future__ import annotations

from typing import Any

from probe_core.api import CheckContext, CheckRow

from probe_config_check.common import STAT_KEYS, stats_equal, values_equal
from probe_config_check.steps import ForwardSteps, compare_steps, max_steps
from probe_config_check.tensor_stats import named_parameters, tensor_stats


def collect(ctx: CheckContext) -> ForwardSteps | None:
    if ctx.model is None:
        return None
    model = ctx.model

    def parameter_stats(args: Any = None, kwargs: Any = None) -> dict[str, Any]:
        return {name: tensor_stats(p) for name, p in named_parameters(model)}

    recorder = ForwardSteps(model, max_steps(ctx.options), parameter_stats)
    recorder.steps["0"] = parameter_stats()  # a model that never runs forward still has its weights packed
    return recorder


def compact(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if stats is None else {k: stats.get(k) for k in ("shape", "dtype", *STAT_KEYS)}


def compare_stats(bench: dict[str, Any], target: dict[str, Any], prefix: str = "") -> list[CheckRow]:
    """One row per tensor name: shapes, dtypes and max/min/mean/norm must agree (relative 1e-6)."""
    rows = []
    for name in sorted(set(bench) | set(target)):
        b, t = bench.get(name), target.get(name)
        if b is None or t is None:
            rows.append(CheckRow(prefix + name, compact(b), compact(t), False,
                                 f"missing in {'bench' if b is None else 'target'}"))
            continue
        same = stats_equal(b, t)
        note = "" if same else _what_differs(b, t)
        rows.append(CheckRow(prefix + name, compact(b), compact(t), same, note))
    return rows


def _what_differs(b: dict[str, Any], t: dict[str, Any]) -> str:
    keys = [k for k in ("shape", "dtype") if None not in (b.get(k), t.get(k)) and b.get(k) != t.get(k)]
    keys += [k for k in STAT_KEYS if not values_equal(b.get(k), t.get(k), rel_tol=1e-6, abs_tol=1e-12)]
    return "differs in " + ", ".join(keys)


def per_step(data: dict[str, Any]) -> dict[str, Any]:
    """``{"steps": {...}}`` of weights data, old single-snapshot packs (``{"parameters": ...}``) as step 0."""
    if "steps" not in data and "parameters" in data:
        return {"steps": {"0": data["parameters"]}}
    return data


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    return compare_steps(per_step(bench), per_step(target), compare_stats)
