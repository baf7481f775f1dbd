"""Checker ``weights``: per-parameter statistics of the model when ``ConfigChecker`` was created."""

from __future__ import annotations

from typing import Any

from probe_core.specs import CheckContext, CheckRow

from probe_config_check.common import STAT_KEYS, stats_equal, values_equal
from probe_config_check.tensor_stats import named_parameters, tensor_stats


def collect(ctx: CheckContext) -> dict[str, Any] | None:
    if ctx.model is None:
        return None
    return {"parameters": {name: tensor_stats(p) for name, p in named_parameters(ctx.model)}}


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
    keys = [k for k in ("shape", "dtype") if b.get(k) != t.get(k)]
    keys += [k for k in STAT_KEYS if not values_equal(b.get(k), t.get(k), rel_tol=1e-6, abs_tol=1e-12)]
    return "differs in " + ", ".join(keys)


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    return compare_stats(bench.get("parameters", {}), target.get("parameters", {}))
