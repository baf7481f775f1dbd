"""Statistics of a tensor split over ranks, from the statistics of its pieces.

For shards of one tensor: Max is the max of the Maxes, Min the min of the
Mins, Mean the size-weighted mean of the Means, Norm the square root of the
sum of squared Norms, and the shape is concatenated along the split axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from probe_core.api import as_float

STATS = ("Max", "Min", "Mean", "Norm")
SAME_RTOL = 1e-6


def is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value and "Max" in value


def signature(value: dict) -> tuple:
    """What identifies a tensor's numbers (shape and statistics)."""
    return (tuple(value.get("shape") or ()),) + tuple(value.get(k) for k in STATS)


def same(values: Sequence[dict]) -> bool:
    """True when every rank holds the same tensor (replicated): equal shapes and statistics."""
    first = values[0]
    for other in values[1:]:
        if list(other.get("shape") or ()) != list(first.get("shape") or ()):
            return False
        for key in STATS:
            a, b = as_float(first.get(key)), as_float(other.get(key))
            if a is None or b is None:
                if first.get(key) != other.get(key):
                    return False
            elif not (a == b or (math.isnan(a) and math.isnan(b))
                      or abs(a - b) <= SAME_RTOL * max(abs(a), abs(b))):
                return False
    return True


def merge_shards(values: Sequence[dict], dim: int) -> dict[str, Any]:
    """The statistics of the tensor whose pieces (in rank order) are ``values``, split along ``dim``."""
    shapes = [list(v.get("shape") or ()) for v in values]
    sizes = [math.prod(shape) if shape else 1 for shape in shapes]
    total = sum(sizes) or 1
    merged: dict[str, Any] = {}
    maxes = [m for v in values if (m := as_float(v.get("Max"))) is not None]
    mins = [m for v in values if (m := as_float(v.get("Min"))) is not None]
    means = [(m, n) for v, n in zip(values, sizes) if (m := as_float(v.get("Mean"))) is not None]
    norms = [m for v in values if (m := as_float(v.get("Norm"))) is not None]
    merged["Max"] = max(maxes) if len(maxes) == len(values) else values[0].get("Max")
    merged["Min"] = min(mins) if len(mins) == len(values) else values[0].get("Min")
    merged["Mean"] = sum(m * n for m, n in means) / total if len(means) == len(values) else values[0].get("Mean")
    merged["Norm"] = math.sqrt(sum(n * n for n in norms)) if len(norms) == len(values) else values[0].get("Norm")
    shape = shapes[0]
    if shape:
        axis = dim % len(shape)
        shape = list(shape)
        shape[axis] = sum(s[axis] for s in shapes if len(s) == len(shape))
    merged["shape"] = shape
    return merged
