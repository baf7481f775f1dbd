"""Overflow levels of a single graph's nodes (``probe graph --overflow``).

From the statistics of each node's inputs and outputs (a tensor is abnormal
when its Max, Min or Mean is NaN or +-Inf):

* ``medium``: abnormal input, normal output;
* ``high``: abnormal input and abnormal output, or every value finite but
  the output's norm more than :data:`NORM_JUMP` times the largest input norm;
* ``critical``: normal input, abnormal output — where an overflow starts.
"""

from __future__ import annotations

import math
from typing import Any

from probe_graph.api import Graph, TensorTable

MEDIUM, HIGH, CRITICAL = "medium", "high", "critical"
LEVELS = (MEDIUM, HIGH, CRITICAL)
NORM_JUMP = 100.0
_CHECKED = ("Max", "Min", "Mean")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _abnormal(table: TensorTable) -> bool:
    for value in table.values():
        for key in _CHECKED:
            number = _number(value.get(key))
            if number is not None and not math.isfinite(number):
                return True
    return False


def _max_norm(table: TensorTable) -> float | None:
    norms = [n for v in table.values() if (n := _number(v.get("Norm"))) is not None and math.isfinite(n)]
    return max(norms) if norms else None


def overflow_level(inputs: TensorTable, outputs: TensorTable) -> str | None:
    """The level of one node, or None when nothing is wrong."""
    bad_in, bad_out = _abnormal(inputs), _abnormal(outputs)
    if bad_in:
        return HIGH if bad_out else MEDIUM
    if bad_out:
        return CRITICAL
    out_norm = _max_norm(outputs)
    if out_norm is None:
        return None
    in_norm = _max_norm(inputs)
    if in_norm is None:
        return None
    jump = out_norm > NORM_JUMP if in_norm == 0 else out_norm / in_norm > NORM_JUMP
    return HIGH if jump else None


def mark_overflow(graph: Graph) -> int:
    """Set ``overflow_level`` on every node of ``graph``; return how many nodes got one."""
    marked = 0
    for node in graph.nodes.values():
        if node.inputs or node.outputs:
            node.overflow_level = overflow_level(node.inputs, node.outputs)
            marked += node.overflow_level is not None
    return marked
