"""``overflow_check``: statistics, keeping only entries whose tensors hold NaN or ±Inf.

NaN propagates into Max/Min and ±Inf shows in Max or Min, so the statistics
already fetched in batches decide; the collection stops after
``overflow_nums`` such entries (``-1``: no limit).
"""

from __future__ import annotations

from probe_modes.collect.statistics import StatisticsMode


class OverflowMode(StatisticsMode):
    name = "overflow_check"
    only_overflow = True


def load() -> OverflowMode:
    return OverflowMode()
