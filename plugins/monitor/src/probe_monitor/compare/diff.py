"""Where two monitored runs part: align rows, measure relative differences, judge them against earlier noise.

Rows are matched by (rank, quantity, vpp stage, name, step, micro-step). A row's difference is the
largest over its statistics of ``(|a - b| - rounding) / scale`` (the rounding: what the files' decimals
allow, :attr:`Row.resolution`; msprobe writes 6 decimals), the scale being the larger of the two norms (a
tensor's min, max and mean are bounded by its norm) or, without a norm, the larger magnitude; NaN on
one side only is an infinite difference, NaN on both none. Steps are judged in order: a quantity's
**noise** is the largest difference it showed at the earlier steps, and a row **parts** when its
difference exceeds ``max(rtol, noise_factor × noise)``. The first step with a parting row is named,
then within it the first quantity along the update chain (:data:`~probe_monitor.records.CHAIN`) and,
within that quantity, the first row in record order (for gradients: backward order, so the parameter
closest to the loss whose gradient changed — where the change entered). A statistic NaN or infinite on one
side only (or NaN against Inf) is a finding of its own: at its step it is named before any ordinary difference.

Rows only one run has, and statistics only one run records, are not compared and are counted
(:class:`Unmatched`): two runs never "agree" silently on what only one of them holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probe_core.api import spans
from probe_monitor.records import Row, chain_index

RTOL = 1e-5
NOISE_FACTOR = 10.0


@dataclass(frozen=True)
class Pair:
    rank: int
    a: Row
    b: Row
    order: int
    diff: float
    threshold: float

    @property
    def parts(self) -> bool:
        return self.diff > self.threshold

    @property
    def non_finite(self) -> list[str]:
        """The statistics NaN or infinite on one side only, or NaN on one side and infinite on the other."""
        if self.a.missing or self.b.missing:
            return []
        return [op for op in self.a.stats if op in self.b.stats and _one_sided(self.a.stats[op], self.b.stats[op])]

    @property
    def sort_key(self) -> tuple:
        return self.a.step, chain_index(self.a.tag), self.rank, self.order

    @property
    def priority(self) -> tuple:
        """Which parting row is named first: the earliest step; within it NaN/Inf on one side, then the chain."""
        return self.a.step, not self.non_finite, chain_index(self.a.tag), self.rank, self.order


@dataclass
class Unmatched:
    """What one side holds and the other does not, so it was not compared."""

    rows: list[tuple[int, Row]] = field(default_factory=list)  # (rank, row)
    statistics: set[str] = field(default_factory=set)  # recorded by this side only (in matched rows)

    def __len__(self) -> int:
        return len(self.rows)

    def describe(self) -> str:
        """``12 rows (steps 4-5: grad_reduced, param_updated)``, or ``""`` when nothing."""
        if not self.rows:
            return ""
        steps = spans(row.step for _, row in self.rows)
        tags = ", ".join(sorted({row.tag for _, row in self.rows}, key=chain_index))
        return f"{len(self.rows)} rows (steps {steps}: {tags})"

    def as_json(self) -> dict[str, Any]:
        return unmatched_json(len(self.rows), {row.step for _, row in self.rows}, {rank for rank, _ in self.rows},
                              {row.tag for _, row in self.rows}, self.statistics)


def unmatched_json(rows: int, steps: set[int], ranks: set[int], tags: set[str], statistics: set[str]) -> dict[str, Any]:
    """What one side holds alone, as summary.json's ``unmatched`` says it."""
    return {"rows": rows, "steps": spans(steps), "ranks": spans(ranks), "quantities": sorted(tags, key=chain_index),
            "statistics": sorted(statistics)}


@dataclass
class Comparison:
    pairs: list[Pair]
    first: Pair | None
    noise: dict[str, float]  # per quantity, at the first parting step (or over every step)
    only_a: Unmatched = field(default_factory=Unmatched)
    only_b: Unmatched = field(default_factory=Unmatched)
    no_common_statistic: int = 0  # matched rows whose sides share no statistic (not compared)
    ranks: list[int] = field(default_factory=list)

    @property
    def non_finite(self) -> list[Pair]:
        return [p for p in self.pairs if p.non_finite]

    @property
    def complete(self) -> bool:
        """Every row and statistic of both runs was compared."""
        return not (self.only_a.rows or self.only_b.rows or self.only_a.statistics or self.only_b.statistics
                    or self.no_common_statistic)


def _one_sided(x: float, y: float) -> bool:
    if math.isnan(x) and math.isnan(y) or x == y:
        return False
    return not (math.isfinite(x) and math.isfinite(y))


def row_diff(a: Row, b: Row) -> float:
    ops = [op for op in a.stats if op in b.stats]
    if "norm" in ops and math.isfinite(a.stats["norm"]) and math.isfinite(b.stats["norm"]):
        scale = max(abs(a.stats["norm"]), abs(b.stats["norm"]))
    else:
        scale = None
    worst, rounding = 0.0, a.resolution + b.resolution
    for op in ops:
        x, y = a.stats[op], b.stats[op]
        if _one_sided(x, y):
            return math.inf
        if math.isnan(x) and math.isnan(y) or x == y:
            continue
        gap = max(0.0, abs(x - y) - rounding)  # what the files' rounding cannot explain
        if op in ("zeros", "nans"):  # a fraction and a count: absolute
            worst = max(worst, gap)
            continue
        denominator = scale if scale is not None and op != "norm" else max(abs(x), abs(y))
        worst = max(worst, gap / max(denominator, 1e-30))
    return worst


def compare_runs(a: dict[int, list[tuple[int, Row]]], b: dict[int, list[tuple[int, Row]]], *,
                 rtol: float = RTOL, noise_factor: float = NOISE_FACTOR,
                 noise_before: Mapping[str, float] | None = None) -> Comparison:
    """Compare two outputs (``{rank: [(record order, Row)]}``) rank by rank; see the module docstring.
    ``noise_before``: each quantity's noise at the steps before these rows' (``--incremental`` judged them)."""
    by_step: dict[int, list[tuple[int, int, Row, Row]]] = defaultdict(list)
    only_a, only_b = Unmatched(), Unmatched()
    no_common = 0
    ranks = sorted(set(a) & set(b))
    for rank in ranks:
        other = {_key(row): row for _, row in b[rank]}
        for order, row in a[rank]:
            match = other.pop(_key(row), None)
            if match is None:
                only_a.rows.append((rank, row))
                continue
            only_a.statistics |= set(row.stats) - set(match.stats)
            only_b.statistics |= set(match.stats) - set(row.stats)
            if set(row.stats) & set(match.stats):
                by_step[row.step].append((rank, order, row, match))
            else:
                no_common += 1
        only_b.rows += [(rank, row) for row in other.values()]
    only_a.rows += [(rank, row) for rank in sorted(set(a) - set(b)) for _, row in a[rank]]
    only_b.rows += [(rank, row) for rank in sorted(set(b) - set(a)) for _, row in b[rank]]
    pairs: list[Pair] = []
    noise: dict[str, float] = defaultdict(float, noise_before or {})
    first = None
    for step in sorted(by_step):
        found = [Pair(rank, x, y, order, row_diff(x, y), max(rtol, noise_factor * noise[x.tag]))
                 for rank, order, x, y in by_step[step] if not (x.missing and y.missing)]
        pairs.extend(found)
        parting = [p for p in found if p.parts]
        if first is None and parting:
            first = min(parting, key=lambda p: p.priority)
        if first is None:
            for p in found:
                noise[p.a.tag] = max(noise[p.a.tag], p.diff)
    pairs.sort(key=lambda p: p.sort_key)
    return Comparison(pairs, first, dict(noise), only_a, only_b, no_common, ranks)


def _key(row: Row) -> tuple:
    return row.tag, row.vpp_stage, row.name, row.step, row.micro_step
