"""The ``overflow_check`` data mode (plugin ``overflow_check``; task ``overflow_check``).

The statistics record, keeping only entries whose tensors hold NaN or ±Inf:
NaN propagates into Max and Min and ±Inf shows in one of them, so the
statistics already fetched in batches decide. Collection stops after
``overflow_check.overflow_nums`` such entries (``-1``: no limit). Its dumps
are statistics dumps and compare as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from probe_core.api import DataModeSpec, hookimpl
from probe_modes.statistics import StatisticsMode


def overflowed(value: Any) -> bool:
    """True when some tensor record inside ``value`` has a NaN/Inf Max or Min."""
    if isinstance(value, dict):
        for key in ("Max", "Min"):
            stat = value.get(key)
            if isinstance(stat, float) and not math.isfinite(stat):
                return True
        return any(overflowed(item) for item in value.values() if isinstance(item, (dict, list)))
    if isinstance(value, list):
        return any(overflowed(item) for item in value)
    return False


class OverflowPolicy:
    """Keeps overflowing entries until ``limit`` of them are kept (``-1``: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = 0
        self.exhausted = False

    def keep(self, entry: Mapping[str, Any]) -> bool:
        if self.exhausted or not overflowed(entry):
            return False
        self.kept += 1
        self.exhausted = self.limit != -1 and self.kept >= self.limit
        return True


class OverflowMode(StatisticsMode):
    name = "overflow_check"

    def entry_policy(self, config: Any) -> OverflowPolicy:
        return OverflowPolicy(int(config.sections.get("overflow_check", {}).get("overflow_nums", 1)))

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        return False  # its dumps are statistics dumps


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("overflow_check", "only entries whose tensors hold NaN/Inf", OverflowMode,
                         tasks=("overflow_check",))]
