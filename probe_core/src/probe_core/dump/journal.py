"""Reading the record journal a collection appends while a step runs (``step{N}/rank{R}/.journal.jsonl``).

One JSON array per line (see :mod:`probe_core.collect.journal`, which writes it):
``["H", header]``, ``["S", stack_id, [lines]]``, ``["e", name, stack_id|null, value]``,
``["d", name, value]``, ``["c", name, parent|null]``. A killed process can leave a torn last line;
reading stops there. A line that is not one of these records (a damaged file) also stops the reading,
and :attr:`StepRecords.problem` says where.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any

from probe_core.records import record

JOURNAL_NAME = ".journal.jsonl"


@record(frozen=False)
class StepRecords:
    """Everything one step and rank produced, kept as serialised JSON text where possible."""

    entries: list[tuple[str, str]] = field(default_factory=list)  # (name, value as JSON text)
    debug: list[tuple[str, str]] = field(default_factory=list)
    construct: dict[str, str | None] = field(default_factory=dict)
    stack_lines: dict[int, list[str]] = field(default_factory=dict)
    stack_names: dict[int, list[str]] = field(default_factory=dict)
    header: dict[str, Any] | None = None
    problem: str | None = None  # why reading stopped before the end of the journal (a torn last line is none)

    def add_line(self, item: list[Any], value_text: str | None = None) -> None:
        """Apply one journal record (``value_text`` avoids re-serialising a known value)."""
        kind = item[0]
        if kind == "S":
            self.stack_lines[item[1]] = item[2]
        elif kind == "e":
            name, sid = item[1], item[2]
            self.entries.append((name, value_text if value_text is not None else _dumps(item[3])))
            if sid is not None:
                self.stack_names.setdefault(sid, []).append(name)
        elif kind == "d":
            self.debug.append((item[1], value_text if value_text is not None else _dumps(item[2])))
        elif kind == "c":
            self.construct[item[1]] = item[2]
        elif kind == "H":
            self.header = item[1]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _is_int(value: Any) -> bool:
    return type(value) is int


def valid_record(item: Any) -> bool:
    """Whether ``item`` is one well-formed journal record."""
    if not isinstance(item, list) or len(item) < 2 or not isinstance(item[0], str):
        return False
    kind, n = item[0], len(item)
    if kind == "H":
        return n == 2 and isinstance(item[1], dict)
    if kind == "S":
        return n == 3 and _is_int(item[1]) and isinstance(item[2], list) and all(isinstance(x, str) for x in item[2])
    if kind == "e":
        return n == 4 and isinstance(item[1], str) and (item[2] is None or _is_int(item[2]))
    if kind == "d":
        return n == 3 and isinstance(item[1], str)
    if kind == "c":
        return n == 3 and isinstance(item[1], str) and (item[2] is None or isinstance(item[2], str))
    return False


def read_journal(path: Path) -> StepRecords:
    """Parse a journal; a torn last line (the process died mid-write) is ignored, a damaged line ends the
    reading with :attr:`StepRecords.problem` set."""
    records = StepRecords()
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.endswith(b"\n"):
                break  # torn by a kill: expected, not a problem
            try:
                item = json.loads(raw)
            except (ValueError, RecursionError):
                records.problem = f"line {number} is not a JSON record"
                break
            if not valid_record(item):
                records.problem = f"line {number} is not a journal record"
                break
            records.add_line(item)
    return records
