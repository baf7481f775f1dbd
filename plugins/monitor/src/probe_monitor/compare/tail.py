"""Reading a monitor CSV on from where an earlier read stopped (``probe monitor compare --incremental``): each
record with the byte offset after it, so that the next read starts there and reads nothing twice.

The records are the ones :func:`~probe_monitor.compare.reader.read_csv` sees (the same lines handed to the same CSV
reader, a UTF-8 byte-order mark skipped at the file's start); damage is one :class:`CompareError` line naming the
file and the line."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

from probe_core.api import CompareError
from probe_monitor.compare.reader import UNMODIFIED, open_regular

#: bytes before a read's end that must be unchanged for the next read to go on from there
TAIL = 64


def records(path: Path, offset: int, line: int) -> Iterator[tuple[int, list[str], int]]:
    """``(line number, fields, byte offset after the record)`` for each non-blank record of ``path`` from byte
    ``offset`` (the start of a line; ``line`` lines come before it)."""
    pulled = [offset]  # bytes handed to the CSV reader so far

    with open_regular(path) as handle:
        handle.seek(offset)

        def lines() -> Iterator[str]:
            for number, raw in enumerate(handle, line + 1):
                bom = len(codecs.BOM_UTF8) if pulled[0] == 0 and raw.startswith(codecs.BOM_UTF8) else 0
                try:
                    text = raw[bom:].decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise CompareError(f"{path}: line {number}, column {exc.start + 1}: byte "
                                       f"0x{raw[bom + exc.start]:02x} is not UTF-8 text; {UNMODIFIED}") from None
                parts = list(io.StringIO(text, newline=""))  # where read_csv's reader ends its lines
                sizes = [len(raw)] if len(parts) == 1 else [len(part.encode()) + (bom if i == 0 else 0)
                                                            for i, part in enumerate(parts)]
                for part, size in zip(parts, sizes):
                    pulled[0] += size
                    yield part

        reader = csv.reader(lines())
        try:
            for fields in reader:
                if fields:
                    yield line + reader.line_num, fields, pulled[0]
        except csv.Error as exc:
            raise CompareError(f"{path}: line {line + reader.line_num}: {exc} (not a monitor CSV); "
                               f"{UNMODIFIED}") from None


def tail_digest(path: Path, end: int) -> str:
    """A digest of the last :data:`TAIL` bytes before ``end``: whether what was read up to ``end`` is still there."""
    with open_regular(path) as handle:
        handle.seek(max(0, end - TAIL))
        return hashlib.sha1(handle.read(end - max(0, end - TAIL))).hexdigest()
