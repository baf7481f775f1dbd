"""A third-party comparator for statistics dumps: one column, a verdict and a tool tip (plugin ``absmean``).

``AbsMeanDiff`` is ``|target Mean - bench Mean|``; a row whose mean moved by
more than :data:`THRESHOLD` gets the warning "mean moved by ...".
"""

from __future__ import annotations

from typing import Any

from probe_core.api import ComparatorSpec, hookimpl


COLUMN = "AbsMeanDiff"
THRESHOLD = 1e-6


class AbsMeanDiff:
    columns = (COLUMN,)
    tool_tips = {COLUMN: "absolute difference of the target and bench means (probe-test-comparator)"}

    def compare(self, pair: Any) -> dict[str, Any]:
        a, b = pair.npu.mean, pair.bench.mean
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return {}  # written N/A
        return {COLUMN: abs(float(a) - float(b))}

    def judge(self, row: Any) -> tuple[str, str] | None:
        value = row.metrics.get(COLUMN)
        if isinstance(value, float) and value > THRESHOLD:
            return "warning", f"mean moved by {value:.3g}"
        return None


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("absmean", "statistics", "|target mean - bench mean|, warns above 1e-6", AbsMeanDiff)]
