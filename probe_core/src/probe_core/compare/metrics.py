"""Metric helpers shared by comparators (pure Python, no numpy).

Statistics mode compares the four statistics a dump records per tensor;
:func:`statistics_metrics` gives msprobe's eight columns. Relative errors
are fractions here; the CSV writes them as percent strings, like msprobe.
"""

from __future__ import annotations

import math
from typing import Any

from probe_core.dump.leaves import TensorMeta

STAT_LABELS = ("Max", "Min", "Mean", "L2norm")
DIFF_COLUMNS = ("Max diff", "Min diff", "Mean diff", "L2norm diff")
RELATIVE_COLUMNS = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")
NA = "N/A"


def as_float(value: Any) -> float | None:
    """``value`` as a float, or ``None`` for non-numbers (strings, None, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def relative_error(npu: float, bench: float) -> float:
    """|npu - bench| / |bench|; 0 when equal (NaN==NaN, inf==inf), inf when only the bench is 0."""
    if npu == bench or (math.isnan(npu) and math.isnan(bench)):
        return 0.0
    if math.isnan(npu) or math.isnan(bench):
        return math.nan
    if bench == 0:
        return math.inf
    return abs((npu - bench) / bench)


def cosine(dot: float, norm_a: float, norm_b: float) -> float:
    """Cosine similarity from a dot product and two norms: 1 when both are zero, 0 when one is."""
    if norm_a == 0 and norm_b == 0:
        return 1.0
    if norm_a == 0 or norm_b == 0:
        return 0.0
    return dot / (norm_a * norm_b)


def statistics_metrics(npu: TensorMeta, bench: TensorMeta) -> dict[str, Any]:
    """Diffs (target - bench) and relative errors of Max, Min, Mean, Norm; ``N/A`` where not numbers."""
    out: dict[str, Any] = {}
    for diff_col, rel_col, a, b in zip(DIFF_COLUMNS, RELATIVE_COLUMNS, npu.stats, bench.stats):
        if type(a) is float and type(b) is float:  # the common case
            x, y = a, b
        else:
            x, y = as_float(a), as_float(b)
            if x is None or y is None:
                out[diff_col] = out[rel_col] = NA
                continue
        if x == y:
            out[diff_col] = out[rel_col] = 0.0
            continue
        out[diff_col] = x - y if not (math.isinf(x) and x == y) else 0.0
        out[rel_col] = relative_error(x, y)
    return out
