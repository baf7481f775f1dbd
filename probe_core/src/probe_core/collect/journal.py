"""The append-only record journal of one step and rank, and the atomic writing of its final files.

While a step runs, every flushed record is appended to ``{rank_dir}/.journal.jsonl``
as one JSON array per line (written with ``os.write`` on an ``O_APPEND`` file,
so a killed process leaves every complete line behind):

* ``["S", stack_id, [frame lines]]`` — a call stack, once per step;
* ``["e", name, stack_id or null, value]`` — a dump.json entry;
* ``["d", name, value]`` — a debug.json entry (``PrecisionDebugger.save``);
* ``["c", name, parent or null]`` — a construct.json edge.

At step end :func:`write_step_files` writes ``dump.json``, ``stack.json``,
``construct.json`` (and ``debug.json`` when there are saves) through temporary
files renamed into place, then the journal is removed. :func:`recover_step`
rebuilds the same files from a journal a dead process left behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.errors import DumpError

JOURNAL_NAME = ".journal.jsonl"


@dataclass
class StepRecords:
    """Everything one step and rank produced, kept as serialised JSON text where possible."""

    entries: list[tuple[str, str]] = field(default_factory=list)  # (name, value as JSON text)
    debug: list[tuple[str, str]] = field(default_factory=list)
    construct: dict[str, str | None] = field(default_factory=dict)
    stack_lines: dict[int, list[str]] = field(default_factory=dict)
    stack_names: dict[int, list[str]] = field(default_factory=dict)

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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class Journal:
    """Appends journal lines for one ``step{N}/rank{R}`` folder; created on first write."""

    def __init__(self, rank_dir: Path) -> None:
        self.rank_dir = rank_dir
        self.path = rank_dir / JOURNAL_NAME
        self._fd: int | None = None

    def append(self, lines: Iterable[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        if not text:
            return
        if self._fd is None:
            self.rank_dir.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
            self._fd = os.open(self.path, flags, 0o640)
        data = text.encode("utf-8")
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    def close(self, remove: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary sibling of ``path``; returns the temporary path.

    No fsync: the rename makes the file appear whole to readers, and a killed
    process cannot lose what the kernel already holds (only a power cut could).
    """
    tmp = path.with_name(f".{path.name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o640)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return tmp


def _object_text(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return "{}"
    return "{\n" + ",\n".join(f"{_dumps(name)}: {value}" for name, value in pairs) + "\n}"


def write_step_files(rank_dir: Path, header: dict[str, Any], records: StepRecords) -> list[Path]:
    """Write the step's files atomically (all temporaries first, then renames); returns the final paths."""
    head = ",\n".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in header.items())
    files: dict[str, str] = {
        "dump.json": "{\n" + head + ',\n"data": ' + _object_text(records.entries) + "\n}\n",
        "stack.json": _dumps({str(sid): [records.stack_names.get(sid, []), lines]
                              for sid, lines in records.stack_lines.items()
                              if records.stack_names.get(sid)}),
        "construct.json": _dumps(records.construct),
    }
    if records.debug:
        debug_header = dict(header, level="debug")
        head = ",\n".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in debug_header.items())
        files["debug.json"] = "{\n" + head + ',\n"data": ' + _object_text(records.debug) + "\n}\n"
    if not records.entries:
        del files["dump.json"], files["stack.json"], files["construct.json"]
    try:
        rank_dir.mkdir(parents=True, exist_ok=True)
        temporaries = {name: _write_atomic(rank_dir / name, text) for name, text in files.items()}
        for name, tmp in temporaries.items():
            os.replace(tmp, rank_dir / name)
    except OSError as exc:
        raise DumpError(f"{rank_dir}: cannot write the step's dump files: {exc}; "
                        "check free space and permissions of the dump path") from None
    return [rank_dir / name for name in files]


def read_journal(path: Path) -> StepRecords:
    """Parse a journal; a torn last line (the process died mid-write) is ignored."""
    records = StepRecords()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                break
            records.add_line(item)
    return records


def recover_step(rank_dir: str | os.PathLike[str], header: dict[str, Any] | None = None) -> list[Path]:
    """Rebuild ``dump.json``/``stack.json``/``construct.json`` of a step whose process died.

    ``rank_dir`` is the ``step{N}/rank{R}`` folder holding ``.journal.jsonl``;
    the header (task, level, framework, dump_data_dir) is taken from the
    journal's first line when present. The journal is kept.
    """
    rank_dir = Path(rank_dir)
    path = rank_dir / JOURNAL_NAME
    if not path.is_file():
        raise DumpError(f"{rank_dir}: no {JOURNAL_NAME} to recover from; the step either finished "
                        "(its dump.json is final) or never recorded anything")
    with open(path, encoding="utf-8") as handle:
        first = handle.readline()
    found: dict[str, Any] = {}
    try:
        item = json.loads(first)
        if item and item[0] == "H":
            found = item[1]
    except json.JSONDecodeError:
        pass
    return write_step_files(rank_dir, header or found or
                            {"task": None, "level": None, "framework": None, "dump_data_dir": None},
                            read_journal(path))
