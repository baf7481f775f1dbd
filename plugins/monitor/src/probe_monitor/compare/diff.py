"""Where two monitored runs part: align rows, measure relative differences, judge them against earlier noise.

Rows are matched by (rank, quantity, vpp stage, name, step, micro-step). A row's difference is the
largest over its statistics of ``|a - b| / scale``, the scale being the larger of the two norms (a
tensor's min, max and mean are bounded by its norm) or, without a norm, the larger magnitude; NaN on
one side only is an infinite difference, NaN on both none. Steps are judged in order: a quantity's
**noise** is the largest difference it showed at the earlier steps, and a row **parts** when its
difference exceeds ``max(rtol, noise_factor × noise)``. The first step with a parting row is named,
then within it the first quantity along the update chain (:data:`~probe_monitor.records.CHAIN`) and,
within that quantity, the first row in record order (for gradients: backward order, so the parameter
closest to the loss whose gradient changed — where the change entered).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

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
    def sort_key(self) -> tuple:
        return self.a.step, chain_index(self.a.tag), self.rank, self.order


@dataclass
class Comparison:
    pairs: list[Pair]
    first: Pair | None
    noise: dict[str, float]  # per quantity, at the first parting step (or over every step)
    only_a: int = 0
    only_b: int = 0
    ranks: list[int] = field(default_factory=list)


def row_diff(a: Row, b: Row) -> float:
    ops = [op for op in a.stats if op in b.stats]
    if "norm" in ops and math.isfinite(a.stats["norm"]) and math.isfinite(b.stats["norm"]):
        scale = max(abs(a.stats["norm"]), abs(b.stats["norm"]))
    else:
        scale = None
    worst = 0.0
    for op in ops:
        x, y = a.stats[op], b.stats[op]
        if math.isnan(x) and math.isnan(y) or x == y:
            continue
        if not (math.isfinite(x) and math.isfinite(y)):
            return math.inf
        if op in ("zeros", "nans"):  # a fraction and a count: absolute
            worst = max(worst, abs(x - y))
            continue
        denominator = scale if scale is not None and op != "norm" else max(abs(x), abs(y))
        worst = max(worst, abs(x - y) / max(denominator, 1e-30))
    return worst


def compare_runs(a: dict[int, list[tuple[int, Row]]], b: dict[int, list[tuple[int, Row]]], *,
                 rtol: float = RTOL, noise_factor: float = NOISE_FACTOR) -> Comparison:
    """Compare two outputs (``{rank: [(record order, Row)]}``) rank by rank; see the module docstring."""
    by_step: dict[int, list[tuple[int, int, Row, Row]]] = defaultdict(list)
    only_a = only_b = 0
    ranks = sorted(set(a) & set(b))
    for rank in ranks:
        other = {_key(row): row for _, row in b[rank]}
        seen = set()
        for order, row in a[rank]:
            match = other.get(_key(row))
            if match is None:
                only_a += 1
                continue
            seen.add(_key(row))
            by_step[row.step].append((rank, order, row, match))
        only_b += len(other) - len(seen)
    pairs: list[Pair] = []
    noise: dict[str, float] = defaultdict(float)
    first = None
    for step in sorted(by_step):
        found = [Pair(rank, x, y, order, row_diff(x, y), max(rtol, noise_factor * noise[x.tag]))
                 for rank, order, x, y in by_step[step] if not (x.missing and y.missing)]
        pairs.extend(found)
        parting = [p for p in found if p.parts]
        if first is None and parting:
            first = min(parting, key=lambda p: p.sort_key)
        if first is None:
            for p in found:
                noise[p.a.tag] = max(noise[p.a.tag], p.diff)
    pairs.sort(key=lambda p: p.sort_key)
    return Comparison(pairs, first, dict(noise), only_a, only_b, ranks)


def _key(row: Row) -> tuple:
    return row.tag, row.vpp_stage, row.name, row.step, row.micro_step
