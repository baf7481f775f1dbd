"""Helpers the checkers share: value normalisation, mapping diffs, and writing a file whole or not at all."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
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


@contextmanager
def replaced_whole(path: Path) -> Iterator[Path]:
    """A temporary name next to ``path`` to write to: renamed to ``path`` when the block ends, removed when it
    fails, so ``path`` is either its old self or complete (never half-written after a full disk)."""
    tmp = path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))  # umask applies
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
