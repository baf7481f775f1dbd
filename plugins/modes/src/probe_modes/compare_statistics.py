"""Statistics-mode comparator: diffs and relative errors of Max, Min, Mean and Norm.

Implements the comparator interface of :mod:`probe_core.compare.comparator`:
``columns`` (msprobe's eight summary columns, in msprobe's position),
``compare(pair)`` returning raw numbers (relative errors as fractions; the
writer shows them as percent strings, as msprobe does).
"""

from __future__ import annotations

from typing import Any

from probe_core.compare.comparator import LeafPair
from probe_core.compare.metrics import DIFF_COLUMNS, RELATIVE_COLUMNS, statistics_metrics


class StatisticsComparator:
    columns = DIFF_COLUMNS + RELATIVE_COLUMNS
    placement = "metrics"
    percent_columns = frozenset(RELATIVE_COLUMNS)

    def compare(self, pair: LeafPair) -> dict[str, Any]:
        return statistics_metrics(pair.npu, pair.bench)


def load() -> StatisticsComparator:
    return StatisticsComparator()
