"""msprobe's trend database, written by probe: one SQLite file whose tables msprobe's ``data2db`` writes and its
trend viewer reads.

* ``monitoring_metrics(metric_id, metric_name)``: the quantities (dump: forward, backward, recompute,
  parameters_grad; monitor: actv, actv_grad, exp_avg, ...);
* ``monitoring_targets(target_id, target_name, vpp_stage, micro_step)``: what was measured
  (``Module.fc1.Linear.input.0``, ``layers.0.weight``); for dumps ``micro_step`` holds the call's count;
* ``trend_data(rank, step, target_id, metric_id, <stat> ...)``: one row per measurement, a REAL column per
  statistic (dump: norm, max, min, mean); values beyond +-1e9 are clamped to +-1e9 (infinities to +-(1e9 + 1));
* ``monitoring_tags(tag_id, tag_name, category, metric_id)`` and ``tag_target_mapping(tag_id, target_id)``:
  the viewer's filters (module, layer, function, index, default);
* ``global_stats``: ``max_rank``, ``min_step``, ``max_step`` and, per metric, its statistics comma-separated.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

DUMP_DB = "dump_data.trend.db"
MONITOR_DB = "monitor_data.trend.db"
#: statistics are clamped to +-LIMIT (infinities to +-(LIMIT + 1)), as msprobe stores them
LIMIT = 1e9
_BATCH = 5000

_SCHEMA = """
CREATE TABLE monitoring_targets (
    target_id INTEGER PRIMARY KEY AUTOINCREMENT,
    target_name TEXT NOT NULL,
    vpp_stage INTEGER NOT NULL,
    micro_step INTEGER NOT NULL DEFAULT 0,
    UNIQUE(target_name, vpp_stage, micro_step));
CREATE TABLE monitoring_metrics (
    metric_id INTEGER PRIMARY KEY AUTOINCREMENT,
    metric_name TEXT UNIQUE NOT NULL);
CREATE TABLE monitoring_tags (
    tag_id INTEGER PRIMARY KEY AUTOINCREMENT,
    tag_name TEXT NOT NULL,
    category TEXT NOT NULL,
    metric_id INTEGER NOT NULL,
    UNIQUE(tag_name, category, metric_id),
    FOREIGN KEY (metric_id) REFERENCES monitoring_metrics(metric_id));
CREATE TABLE tag_target_mapping (
    tag_id INTEGER NOT NULL,
    target_id INTEGER NOT NULL,
    PRIMARY KEY (tag_id, target_id),
    FOREIGN KEY (tag_id) REFERENCES monitoring_tags(tag_id),
    FOREIGN KEY (target_id) REFERENCES monitoring_targets(target_id));
"""

Target = tuple[str, int, int]  # (target_name, vpp_stage, micro_step)


def stat_value(value: Any) -> float | None:
    """A statistic as stored: a number (or numeric text) clamped to +-LIMIT, else NULL."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if math.isinf(value):
        return LIMIT + 1 if value > 0 else -LIMIT - 1
    return float(min(max(value, -LIMIT), LIMIT))


class TrendDB:
    """A new trend database at ``path`` for ``metrics`` measured by ``stats``: :meth:`add` measurements, then
    :meth:`finish` with the global statistics and the tagger. It is written under a temporary name and replaces
    ``path`` (a file an earlier import left) only when finished; used as a context manager, a failed import
    leaves nothing behind."""

    def __init__(self, path: Path, metrics: Sequence[str], stats: Sequence[str]) -> None:
        self.path = path
        self._tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        self._tmp.unlink(missing_ok=True)
        self.conn = sqlite3.connect(self._tmp)
        self.conn.executescript(_SCHEMA)
        columns = "".join(f"    {stat} REAL DEFAULT NULL,\n" for stat in stats)
        self.conn.execute(
            "CREATE TABLE trend_data (\n    rank INTEGER NOT NULL,\n    step INTEGER NOT NULL,\n"
            "    target_id INTEGER NOT NULL,\n    metric_id INTEGER NOT NULL,\n" + columns +
            "    PRIMARY KEY (rank, step, target_id, metric_id),\n"
            "    FOREIGN KEY (target_id) REFERENCES monitoring_targets(target_id),\n"
            "    FOREIGN KEY (metric_id) REFERENCES monitoring_metrics(metric_id)) WITHOUT ROWID")
        self.conn.executemany("INSERT INTO monitoring_metrics (metric_name) VALUES (?)", [(m,) for m in metrics])
        self.metric_ids = {name: i for i, name in self.conn.execute("SELECT metric_id, metric_name "
                                                                    "FROM monitoring_metrics")}
        self.stats = list(stats)
        self._targets: dict[Target, int] = {}
        self._of_metric: dict[int, dict[int, str]] = {i: {} for i in self.metric_ids.values()}
        self._rows: list[tuple] = []
        self.rows = 0

    def add(self, rank: int, step: int, metric: str, target: Target, values: Iterable[Any]) -> None:
        """One measurement; a second one of the same (rank, step, target, metric) is ignored (the first stays)."""
        target_id = self._targets.get(target)
        if target_id is None:
            target_id = self._targets[target] = len(self._targets) + 1
        metric_id = self.metric_ids[metric]
        self._of_metric[metric_id][target_id] = target[0]
        self._rows.append((rank, step, target_id, metric_id, *map(stat_value, values)))
        if len(self._rows) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        marks = ", ".join("?" * (4 + len(self.stats)))
        before = self.conn.total_changes
        self.conn.executemany(f"INSERT OR IGNORE INTO trend_data VALUES ({marks})", self._rows)
        self.rows += self.conn.total_changes - before
        self._rows = []

    def finish(self, global_stats: dict[str, int | Sequence[str]], tags: Callable[[str], set[tuple[str, str]]]) -> int:
        """Write the targets, their tags and ``global_stats`` (ints as INTEGER columns, lists of statistic
        names as comma-separated TEXT); returns the number of measurements stored."""
        self._flush()
        self.conn.executemany("INSERT INTO monitoring_targets VALUES (?, ?, ?, ?)",
                              [(i, *target) for target, i in self._targets.items()])
        for metric_id, targets in self._of_metric.items():
            named = {target_id: tags(name) for target_id, name in targets.items()}
            self.conn.executemany("INSERT OR IGNORE INTO monitoring_tags (tag_name, category, metric_id) "
                                  "VALUES (?, ?, ?)", sorted({(*tag, metric_id) for t in named.values() for tag in t}))
            tag_ids = {(name, category): i for i, name, category in self.conn.execute(
                "SELECT tag_id, tag_name, category FROM monitoring_tags WHERE metric_id = ?", (metric_id,))}
            self.conn.executemany("INSERT OR IGNORE INTO tag_target_mapping (tag_id, target_id) VALUES (?, ?)",
                                  [(tag_ids[tag], target_id) for target_id, t in named.items() for tag in sorted(t)])
        columns = [f"{name} INTEGER DEFAULT 0" if isinstance(value, int) else f"{name} TEXT DEFAULT NULL"
                   for name, value in global_stats.items()]
        self.conn.execute(f"CREATE TABLE global_stats ({', '.join(columns)})")
        values = [value if isinstance(value, int) else ",".join(value) for value in global_stats.values()]
        self.conn.execute(f"INSERT INTO global_stats VALUES ({', '.join('?' * len(values))})", values)
        self.conn.commit()
        self.conn.close()
        os.replace(self._tmp, self.path)
        return self.rows

    def __enter__(self) -> TrendDB:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None:
            self.conn.close()
            self._tmp.unlink(missing_ok=True)
