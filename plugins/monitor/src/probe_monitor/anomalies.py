"""Anomalies as they happen: NaN/Inf in any statistic, and spikes (a value far outside its own recent history).

Each anomaly prints one line on stderr the moment its step ends (at most five a step) and is appended to
``rank{R}/anomalies.json`` (rewritten each time, so it is complete whenever training dies); the first
one prints again when the monitor closes. Within a step, rows are examined in the order their
quantities come about (:data:`~probe_monitor.records.CHAIN`), so the first anomaly is the earliest cause.
A quantity that stays NaN/Inf is reported when it breaks, not again at every later step.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

from probe_core.api import replaced_whole

from probe_monitor.config import SpikeRule
from probe_monitor.records import Row, chain_index, non_finite

FILE = "anomalies.json"
PRINTED = 5  # lines per step on stderr; anomalies.json has all


@dataclass(frozen=True)
class Anomaly:
    step: int
    rank: int
    metric: str  # the quantity (tag): grad_unreduced, param_updated, ...
    name: str  # the parameter or activation
    module: str
    kind: str  # "nan/inf" or the spike rule's name
    stat: str
    value: float | str
    detail: str

    def line(self) -> str:
        return (f"probe monitor: step {self.step} rank {self.rank}: {self.metric} of {self.name}: {self.detail}")


class AnomalyLog:
    """Checks each step's rows, keeps every anomaly, writes ``anomalies.json``."""

    def __init__(self, rules: tuple[SpikeRule, ...], rank: int, folder: Path) -> None:
        self.rules = rules
        self.rank = rank
        self.path = folder / FILE
        self.found: list[Anomaly] = []
        self._broken: set[tuple] = set()  # quantities NaN/Inf since their last finite step
        self._history: dict[tuple[str, str, str], deque[float]] = {}

    def check(self, step: int, rows: list[Row]) -> list[Anomaly]:
        new = []
        for row in sorted(rows, key=lambda r: chain_index(r.tag)):  # stable: record order within a quantity
            if row.missing:
                continue
            bad = non_finite(row.stats)
            key = (row.tag, row.name, row.micro_step)
            if not bad:
                self._broken.discard(key)
            elif key in self._broken:  # still NaN/Inf since it broke: reported once
                continue
            else:
                self._broken.add(key)
                shown = ", ".join(f"{op}={row.stats[op]}" for op in bad)
                new.append(self._anomaly(step, row, "nan/inf", bad[0], f"NaN/Inf ({shown})"))
                continue
            for rule in self.rules:
                spike = self._spike(rule, row)
                if spike:
                    new.append(self._anomaly(step, row, rule.name, *spike))
        if new:
            self.found.extend(new)
            for anomaly in new[:PRINTED]:
                print(anomaly.line(), file=sys.stderr, flush=True)
            if len(new) > PRINTED:
                print(f"probe monitor: step {step} rank {self.rank}: {len(new) - PRINTED} more anomalies in {self.path}",
                      file=sys.stderr, flush=True)
            with replaced_whole(self.path) as temporary:  # a full disk never truncates it
                temporary.write_text(json.dumps([asdict(a) for a in self.found], indent=1))
        return new

    def _anomaly(self, step: int, row: Row, kind: str, stat: str, detail: str) -> Anomaly:
        value = row.stats[stat]
        value = value if math.isfinite(value) else str(value)  # anomalies.json stays strict JSON
        return Anomaly(step, self.rank, row.tag, row.name, row.module, kind, stat, value, detail)

    def _spike(self, rule: SpikeRule, row: Row) -> tuple[str, str] | None:
        if row.tag not in rule.tags:
            return None
        stat = "norm" if "norm" in row.stats else next(iter(row.stats))
        value = row.stats[stat]
        history = self._history.setdefault((rule.name, row.tag, row.name), deque(maxlen=rule.window))
        found = None
        if len(history) >= rule.min_history:
            mean = statistics.fmean(history)
            if rule.name == "AnomalyZScore":
                spread = max(_pstdev(history, mean), 0.05 * abs(mean), 1e-30)  # wiggles under 5% are calm
                score = abs(value - mean) / spread
                why = f"z-score {score:.1f} over the last {len(history)} steps"
            else:  # AnomalyTurbulence
                score = abs(value - mean) / max(abs(mean), 1e-30)
                why = f"{score:.0%} away from the mean of the last {len(history)} steps"
            if score > rule.threshold:
                found = stat, f"spike: {stat}={value:.6g}, recent mean {mean:.6g} ({why} > {rule.threshold:g})"
        history.append(value)
        return found

    def close(self) -> None:
        if self.found:
            first = self.found[0]
            print(f"probe monitor: {len(self.found)} anomalies; the first: step {first.step} rank {first.rank}, "
                  f"{first.metric} of {first.name} ({first.detail}); all in {self.path}", file=sys.stderr,
                  flush=True)


def _pstdev(values: deque[float], mean: float) -> float:
    """The population standard deviation around ``mean`` in float arithmetic (``statistics.pstdev`` computes
    it exactly with fractions: a hundred times slower, at every row of every step)."""
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
