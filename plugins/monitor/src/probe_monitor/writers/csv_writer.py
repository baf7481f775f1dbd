"""The ``csv`` writer: msprobe's layout — ``rank{R}/{tag}_{first}-{last}.csv``, one file per quantity and
record window (``step_count_per_record`` recorded steps), columns
``vpp_stage,name,step,[micro_step,]<ops...>,shape,dtype``."""

from __future__ import annotations

import csv
from collections import defaultdict

from probe_monitor.records import MICRO_TAGS, Row
from probe_monitor.writers import WriterContext


def format_value(value: float) -> str:
    """A float32 statistic as the shortest text that reads back to the same float32 (``8.0``, ``1e-06``, ``nan``)."""
    return repr(float(f"{value:.9g}"))


def header(tag: str, ops: list[str]) -> list[str]:
    micro = ["micro_step"] if tag in MICRO_TAGS else []
    return ["vpp_stage", "name", "step", *micro, *ops, "shape", "dtype"]


def line(row: Row) -> list[str]:
    micro = [str(row.micro_step or 0)] if row.tag in MICRO_TAGS else []
    shape = str(list(row.shape)) if row.shape is not None else "nan"
    return [str(row.vpp_stage), row.name, str(row.step), *micro, *map(format_value, row.stats.values()), shape,
            row.dtype or "nan"]


class CsvWriter:
    def __init__(self, context: WriterContext) -> None:
        self.folder = context.directory
        self.per_file = context.config.step_count_per_record
        self.steps: list[int] = []
        self.rows: dict[str, list[Row]] = defaultdict(list)

    def write_step(self, step: int, rows: list[Row]) -> None:
        self.steps.append(step)
        for row in rows:
            self.rows[row.tag].append(row)
        if len(self.steps) >= self.per_file:
            self._flush()

    def _flush(self) -> None:
        if not self.steps:
            return
        first, last = self.steps[0], self.steps[-1]
        for tag, rows in self.rows.items():
            with open(self.folder / f"{tag}_{first}-{last}.csv", "w", newline="") as handle:
                out = csv.writer(handle)
                out.writerow(header(tag, list(rows[0].stats)))
                out.writerows(line(row) for row in rows)
        self.steps, self.rows = [], defaultdict(list)

    def close(self) -> None:
        self._flush()
