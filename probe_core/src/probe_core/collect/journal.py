"""The append-only record journal of one step and rank, and the atomic writing of its final files.

While a step runs, every flushed record is appended to ``{rank_dir}/.journal.jsonl``
as one JSON array per line (written with ``os.write`` on an ``O_APPEND`` file,
so a killed process leaves every complete line behind):

* ``["S", stack_id, [frame lines]]`` — a call stack, once per step;
* ``["e", name, stack_id or null, value]`` — a dump.json entry;
* ``["d", name, value]`` — a debug.json entry (``PrecisionDebugger.save``);
* ``["c", name, parent or null]`` — a construct.json edge.

At step end :func:`write_step_files` writes ``stack.json``, ``construct.json``
(and ``debug.json`` when there are saves), then ``dump.json``, through temporary
files renamed into place — dump.json last, so a step whose dump.json exists is
whole — then the journal is removed. :func:`recover_step` (``probe recover``)
rebuilds the same files from a journal a dead process left behind, marked
``"partial": true``, without the entries whose tensor files the process died
before writing (a step is finished only when its files are). Every folder level under the dump path is checked on the
way (:func:`safe_dir`): no write follows a symbolic link.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from probe_core.dump.journal import JOURNAL_NAME, StepRecords, read_journal
from probe_core.errors import CollectionError, DumpError

__all__ = ["JOURNAL_NAME", "Journal", "StepRecords", "read_journal", "recover_step", "safe_dir",
           "write_step_files"]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def safe_dir(root: Path, *parts: str) -> Path:
    """``root/parts...``, each level created when missing and refused when it is a symbolic link or not a
    folder: no write of a collection follows a link inside the dump path (``root`` itself is checked
    up front by :func:`probe_core.collect.session.check_dump_path`)."""
    root.mkdir(parents=True, exist_ok=True)
    current = root
    for part in parts:
        current = current / part
        try:
            os.mkdir(current, 0o750)
        except FileExistsError:
            pass
        mode = os.lstat(current).st_mode
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            raise CollectionError(f"{current}: is {what} inside the dump path; probe never writes through links "
                                  "or over files there: remove it, or choose another dump_path")
    return current


def _rank_dir(rank_dir: Path, root: Path | None) -> Path:
    if root is None:
        rank_dir.mkdir(parents=True, exist_ok=True)
        return rank_dir
    return safe_dir(root, *rank_dir.relative_to(root).parts)


class Journal:
    """Appends journal lines for one ``step{N}/rank{R}`` folder; created on first write (under ``root``,
    the dump path, every folder level is checked: no symbolic links)."""

    def __init__(self, rank_dir: Path, root: Path | None = None) -> None:
        self.rank_dir = rank_dir
        self.root = root
        self.path = rank_dir / JOURNAL_NAME
        self._fd: int | None = None

    def append(self, lines: Iterable[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        if not text:
            return
        if self._fd is None:
            _rank_dir(self.rank_dir, self.root)
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


def write_step_files(rank_dir: Path, header: dict[str, Any], records: StepRecords,
                     root: Path | None = None, *, extra_files: bool = True, with_values: bool = True) -> list[Path]:
    """Write the step's files atomically (all temporaries first, then renames, ``dump.json`` last: a step
    whose dump.json exists is whole); returns the final paths. ``extra_files`` False (config ``extra_info``):
    no stack.json and construct.json; ``with_values`` False (task ``structure``): dump.json's data is ``{}``."""
    head = ",\n".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in header.items())
    files: dict[str, str] = {
        "stack.json": _dumps({str(sid): [records.stack_names.get(sid, []), lines]
                              for sid, lines in records.stack_lines.items()
                              if records.stack_names.get(sid)}),
        "construct.json": _dumps(records.construct),
    }
    if records.debug:
        debug_header = dict(header, level="debug")
        debug_head = ",\n".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in debug_header.items())
        files["debug.json"] = "{\n" + debug_head + ',\n"data": ' + _object_text(records.debug) + "\n}\n"
    if records.entries:
        data = _object_text(records.entries) if with_values else "{}"
        files["dump.json"] = "{\n" + head + ',\n"data": ' + data + "\n}\n"
    if not records.entries or not extra_files:
        del files["stack.json"], files["construct.json"]
    try:
        _rank_dir(rank_dir, root)
        temporaries = {name: _write_atomic(rank_dir / name, text) for name, text in files.items()}
        for name, tmp in temporaries.items():
            os.replace(tmp, rank_dir / name)
    except OSError as exc:
        raise DumpError(f"{rank_dir}: cannot write the step's dump files: {exc}; "
                        "check free space and permissions of the dump path") from None
    return [rank_dir / name for name in files]


def recover_step(rank_dir: str | os.PathLike[str], header: dict[str, Any] | None = None, *,
                 remove_journal: bool = False) -> list[Path]:
    """Rebuild ``dump.json``/``stack.json``/``construct.json`` of a step whose process died.

    ``rank_dir`` is the ``step{N}/rank{R}`` folder holding ``.journal.jsonl``;
    the header (task, level, framework, dump_data_dir) is taken from the
    journal's first line when present, and marked ``"partial": true,
    "recovered": true``. Entries naming a tensor file the process did not write
    whole are left out (a warning counts them). The journal is kept unless
    ``remove_journal``.
    """
    rank_dir = Path(rank_dir)
    path = rank_dir / JOURNAL_NAME
    if not path.is_file():
        raise DumpError(f"{rank_dir}: no {JOURNAL_NAME} to recover from; the step either finished "
                        "(its dump.json is final) or never recorded anything")
    records = read_journal(path)
    _warn_dropped(rank_dir, drop_unwritten(records, rank_dir / "dump_tensor_data"), records)
    found = dict(records.header or {"task": None, "level": None, "framework": None, "dump_data_dir": None})
    found.update(partial=True, recovered=True)
    written = write_step_files(rank_dir, header or found, records)
    if remove_journal:
        path.unlink()
    return written


def _warn_dropped(rank_dir: Path, dropped: list[str], records: StepRecords) -> None:
    if not dropped:
        return
    from probe_core.plugins import ProbeWarning

    what = "the recovered dump.json names only files on disk" if records.entries or records.debug else \
        "no entry is left: no dump.json written"
    warnings.warn(f"{rank_dir}: left out {len(dropped)} entries ({dropped[0]}, ...) whose tensor files the killed "
                  f"run never wrote whole; {what}", ProbeWarning, stacklevel=3)


def drop_unwritten(records: StepRecords, tensor_dir: Path) -> list[str]:
    """Leave out of ``records`` the dump.json and debug.json entries naming a tensor file that is not whole in
    ``tensor_dir`` (missing, cut short, or a name that would leave the folder); returns their names."""
    dropped: list[str] = []
    for pairs in (records.entries, records.debug):
        kept = []
        for name, text in pairs:
            if '"data_name"' not in text or all(_tensor_file_whole(tensor_dir, data_name)
                                                for data_name in _data_names(json.loads(text))):
                kept.append((name, text))
            else:
                dropped.append(name)
        pairs[:] = kept
    if dropped:
        gone = set(dropped)
        records.stack_names = {sid: [name for name in names if name not in gone]
                               for sid, names in records.stack_names.items()}
    return dropped


def _data_names(value: Any) -> list[str]:
    """Every ``data_name`` in an entry's value, however deeply nested (no recursion: a journal may be hostile)."""
    names, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("data_name"), str):
                names.append(item["data_name"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


def _tensor_file_whole(tensor_dir: Path, data_name: str) -> bool:
    """Whether ``tensor_dir/data_name`` is a whole tensor file: a plain name, a regular file, and for ``.pt``
    (a zip archive, whose end record is written last) or ``.npy`` (a header, then the data) not cut short."""
    if not data_name or data_name in (".", "..") or any(c in data_name for c in "/\\\x00"):
        return False
    path = tensor_dir / data_name
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        if path.suffix == ".pt":
            return zipfile.is_zipfile(path)
        if path.suffix == ".npy":
            return _npy_whole(path)
    except (OSError, ValueError):  # ValueError: a name the file system cannot encode
        return False
    return True


def _npy_whole(path: Path) -> bool:
    """An ``.npy`` file holds all the bytes its header announces (read without numpy: the header is the
    magic, a version, its length and a Python dict literal ``{'descr': '<f4', 'shape': (2, 3), ...}``)."""
    import ast
    import re
    import struct

    with open(path, "rb") as handle:
        head = handle.read(12)
        if len(head) < 10 or head[:6] != b"\x93NUMPY":
            return False
        wide = head[6] >= 2
        length = struct.unpack("<I", head[8:12])[0] if wide else struct.unpack("<H", head[8:10])[0]
        start = (12 if wide else 10) + length
        handle.seek(start - length)
        try:
            header = ast.literal_eval(handle.read(length).decode("latin1"))
            itemsize = int(re.fullmatch(r"[<>|=]?[a-zA-Z](\d+)", header["descr"]).group(1))
            size = itemsize
            for n in header["shape"]:
                size *= int(n)
        except (ValueError, SyntaxError, TypeError, KeyError, AttributeError, MemoryError, RecursionError):
            return False
        return os.fstat(handle.fileno()).st_size >= start + size
