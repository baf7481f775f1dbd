"""Helpers the checkers share: value normalisation and mapping diffs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from probe_core.api import CheckRow

STAT_KEYS = ("max", "min", "mean", "norm")


def values_equal(a: Any, b: Any, rel_tol: float = 1e-9, abs_tol: float = 0.0) -> bool:
    """Equality that treats 1e-4 == 0.0001, 2 == 2.0 and NaN == NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], rel_tol, abs_tol) for k in a)
    return a == b


def stats_equal(a: Mapping[str, Any], b: Mapping[str, Any], rel_tol: float = 1e-6) -> bool:
    """Two tensor-statistics records agree: max/min/mean/norm, and shape and dtype where both sides
    recorded them (msprobe's packs hold the four statistics only)."""
    for key in ("shape", "dtype"):
        if None not in (a.get(key), b.get(key)) and a.get(key) != b.get(key):
            return False
    return all(values_equal(a.get(k), b.get(k), rel_tol=rel_tol, abs_tol=1e-12) for k in STAT_KEYS)


def diff_rows(bench: Mapping[str, Any], target: Mapping[str, Any],
              equal: Callable[[Any, Any], bool] = values_equal, prefix: str = "") -> list[CheckRow]:
    """One row per key of either side; a key on one side only fails."""
    rows = []
    for key in sorted(set(bench) | set(target)):
        if key not in bench or key not in target:
            side = "bench" if key not in bench else "target"
            rows.append(CheckRow(prefix + key, bench.get(key), target.get(key), False, f"missing in {side}"))
        else:
            rows.append(CheckRow(prefix + key, bench[key], target[key], bool(equal(bench[key], target[key]))))
    return rows


def option_list(options: Mapping[str, Any], key: str) -> list[str]:
    value = options.get(key, [])
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
