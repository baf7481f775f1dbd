"""Metric helpers shared by comparators and checkers (pure Python, no numpy).

Relative errors are fractions here; a comparator's ``percent_columns`` are
written as percent strings, like msprobe writes them.
"""

from __future__ import annotations

import math
from typing import Any


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
