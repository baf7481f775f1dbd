"""The ``csv`` writer: msprobe's layout — ``rank{R}/{tag}_{first}-{last}.csv``, one file per quantity and
record window (``step_count_per_record`` recorded steps), columns
``vpp_stage,name,step,[micro_step,]<ops...>,shape,dtype``."""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from pathlib import Path

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


def _no_links(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o644)


class CsvWriter:
    """Each recorded step is on disk when it ends: its rows are appended to the files of its record window,
    renamed to end at that step (``grad_reduced_0-3.csv`` becomes ``grad_reduced_0-4.csv``), so a run that
    dies keeps every step it finished. A step whose write fails (a full disk) is taken back from every
    file, which then hold the steps before it, whole."""

    def __init__(self, context: WriterContext) -> None:
        self.folder = context.directory
        self.per_file = context.config.step_count_per_record
        self.window: list[int] = []  # the steps of the current record window
        self.files: dict[str, Path] = {}  # quantity -> its file in the window

    def write_step(self, step: int, rows: list[Row]) -> None:
        if len(self.window) >= self.per_file:
            self.window, self.files = [], {}
        grouped: dict[str, list[Row]] = defaultdict(list)
        for row in rows:
            grouped[row.tag].append(row)
        before = {tag: (path, path.stat().st_size) for tag, path in self.files.items()}
        try:
            for tag in [*self.files, *(tag for tag in grouped if tag not in self.files)]:
                self._append(tag, step, grouped.get(tag, []))
        except OSError:
            self._take_back(before)
            raise
        self.window.append(step)

    def _append(self, tag: str, step: int, rows: list[Row]) -> None:
        path = self.folder / f"{tag}_{(self.window or [step])[0]}-{step}.csv"
        old = self.files.get(tag)
        if old is not None and old != path:
            os.replace(old, path)
        self.files[tag] = path
        if not rows:
            return
        try:
            with open(path, "a", newline="", opener=_no_links) as handle:
                out = csv.writer(handle)
                if old is None:
                    out.writerow(header(tag, list(rows[0].stats)))
                out.writerows(line(row) for row in rows)
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            raise

    def _take_back(self, before: dict[str, tuple[Path, int]]) -> None:
        """Undo a failed step: each file cut back to its size before it and renamed back, new files removed."""
        for tag, path in list(self.files.items()):
            try:
                if tag in before:
                    old, size = before[tag]
                    os.truncate(path, size)
                    os.replace(path, old)
                    self.files[tag] = old
                else:
                    del self.files[tag]
                    path.unlink(missing_ok=True)
            except OSError:
                pass

    def close(self) -> None:
        """Nothing is buffered: every step was written when it ended."""
