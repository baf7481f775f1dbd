"""Reading monitor outputs back: probe's and msprobe's CSV layout (``{tag}_{first}-{last}.csv`` per rank folder).

Whatever a folder holds, reading it returns rows or raises one :class:`~probe_core.errors.CompareError`
line naming the file, the line, the column and the fix: only regular files are opened (a FIFO named
like a CSV is refused, not waited on), the text must be UTF-8, every row has the header's fields and
every value its column's type.
"""

from __future__ import annotations

import contextlib
import csv
import decimal
import io
import math
import os
import re
import stat
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from probe_core.api import CompareError, spans
from probe_monitor.layout import layout_of, run_folders
from probe_monitor.records import Row, grad_norm

FILE = re.compile(r"^(?P<tag>.+)_(?P<first>\d+)-(?P<last>\d+)\.csv$")
RANK = re.compile(r"rank_?(\d+)")
FIXED = ("vpp_stage", "name", "step", "micro_step", "shape", "dtype")
REQUIRED = ("vpp_stage", "name", "step", "shape", "dtype")
UNMODIFIED = "pass an unmodified monitor output (TrainerMon or probe run --task monitor writes it)"


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise CompareError(f"{folder}: cannot be listed ({exc.strerror or exc}); pass a folder you can read") from None


def _holds_csv(folder: Path) -> bool:
    return any(FILE.match(p.name) for p in _entries(folder))


def rank_folders(path: Path) -> dict[int, Path]:
    """``{rank: folder}`` of a monitor output: the folder itself when it holds CSVs (rank from its name, else 0),
    else its rank folders (:mod:`probe_monitor.layout`: msprobe's ``{time}-rank{R}-{id}``, probe's earlier
    ``rank{R}``), the newest of a rank when several runs left theirs; else sub-folders whose name holds
    ``rank{R}`` (``rank0_out``)."""
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "no such folder"
        raise CompareError(f"{path}: {what}; pass a monitor output folder (the one holding rank folders)")
    if _holds_csv(path):
        match = RANK.search(path.name)
        return {int(match.group(1)) if match else 0: path}
    runs = {rank: [f for f in folders if _holds_csv(f)] for rank, folders in run_folders(path).items()}
    found = {rank: folders[-1] for rank, folders in runs.items() if folders}
    if not found:
        for child in _entries(path):
            match = RANK.search(child.name)
            if child.is_dir() and match and _holds_csv(child):
                found.setdefault(int(match.group(1)), child)
    if not found:
        raise CompareError(f"{path}: no monitor CSV files ({{tag}}_{{first}}-{{last}}.csv) here or in rank folders; "
                           "pass the folder TrainerMon or probe run --task monitor wrote (default ./monitor_output)")
    return found


def describe(path: Path, folders: dict[int, Path]) -> str:
    """Which layout ``path`` was read in, and how many older runs of a rank were left out."""
    if list(folders.values()) == [path]:
        return f"{path}: one rank folder (rank {next(iter(folders))})"
    layout = layout_of([folder.name for folder in folders.values()]) or "folders named rank{R}"
    older = sum(len(same) - 1 for same in run_folders(path).values())
    left = f"; {older} older run folder(s) left out, the newest of each rank read" if older else ""
    return f"{path}: {layout}, ranks {spans(folders)}{left}"


def read_rank(folder: Path) -> list[tuple[int, Row]]:
    """``(record order, Row)`` for every row of every CSV in ``folder``; order counts within one file."""
    return [row for path in _entries(folder) if (match := FILE.match(path.name))
            for row in read_csv(path, match.group("tag"))]


def has_grad_norm(side: dict[int, list[tuple[int, Row]]]) -> bool:
    return any(row.tag == "grad_norm" for rows in side.values() for _, row in rows)


def add_grad_norm(side: dict[int, list[tuple[int, Row]]]) -> None:
    """Give an output without ``grad_norm`` files (msprobe writes none) the global norm of its reduced gradients,
    derived from their norms, so that it compares with one that has them."""
    for rows in side.values():
        grads: dict[int, list[Row]] = defaultdict(list)
        for _, row in rows:
            if row.tag == "grad_reduced":
                grads[row.step].append(row)
        rows += [(0, norm) for step in sorted(grads) for norm in grad_norm(grads[step], step)]


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading in binary, if it is a regular file (a FIFO, device or socket is refused without
    waiting on it); an error reading it is one :class:`CompareError` line."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc}); pass a folder you can read") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CompareError(f"{path}: is not a regular file (a FIFO, device or socket named like a monitor CSV); "
                               "remove it from the folder, or pass another folder")
        with open(fd, "rb", closefd=False) as handle:
            yield handle
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc}); pass a folder you can read") from None
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    """The UTF-8 text of a regular file (a FIFO, device or socket is refused without waiting on it)."""
    with open_regular(path) as handle:
        data = handle.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise CompareError(f"{path}: line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 text; "
                           f"{UNMODIFIED}") from None


def read_csv(path: Path, tag: str) -> Iterator[tuple[int, Row]]:
    """The rows of one monitor CSV of quantity ``tag``; any damage is one :class:`CompareError` line."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    lines: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader, None)
        ops = check_header(path, header)
        for fields in reader:
            if not fields:
                continue  # a blank line
            check_fields(path, reader.line_num, fields, header)
            lines.append((reader.line_num, dict(zip(header, fields))))
    except csv.Error as exc:
        raise CompareError(f"{path}: line {reader.line_num}: {exc} (not a monitor CSV); {UNMODIFIED}") from None
    places = max((decimals(values[op]) for _, values in lines for op in ops), default=0)
    resolution = 0.5 * 10.0 ** -places if places else 0.0
    for order, (line, values) in enumerate(lines):
        yield order, row_of(path, line, tag, values, ops, resolution)


def decimals(text: str) -> int:
    """How many decimals a number is written with (``8.3e-05``: 6; ``nan``, ``12``: 0)."""
    try:
        exponent = decimal.Decimal(text.strip()).as_tuple().exponent
    except decimal.InvalidOperation:
        return 0
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def check_header(path: Path, header: list[str] | None) -> list[str]:
    """The statistic columns of a header; a missing, incomplete or repeated header is an error."""
    if not header:
        raise CompareError(f"{path}: line 1: no header (an empty or truncated file); remove the file or {UNMODIFIED}")
    missing = [column for column in REQUIRED if column not in header]
    if missing:
        raise CompareError(f'{path}: line 1: no column "{missing[0]}" (the header must hold {", ".join(REQUIRED)} '
                           f"and the statistics); {UNMODIFIED}")
    repeated = next((column for column, count in Counter(header).items() if count > 1), None)
    if repeated is not None:
        raise CompareError(f'{path}: line 1: column "{repeated}" appears twice; {UNMODIFIED}')
    ops = [column for column in header if column not in FIXED]
    if not ops:
        raise CompareError(f"{path}: line 1: no statistic column (min, max, mean, norm, ...), so nothing to compare; "
                           f"{UNMODIFIED}")
    return ops


def check_fields(path: Path, line: int, fields: list[str], header: list[str]) -> None:
    if len(fields) != len(header):
        raise CompareError(f"{path}: line {line} has {len(fields)} fields, the header {len(header)} (a truncated or "
                           f"edited file); {UNMODIFIED}")


def row_of(path: Path, line: int, tag: str, values: dict[str, str], ops: list[str], resolution: float) -> Row:
    def get(column: str, convert: Callable[[str], Any], default: Any = None) -> Any:
        text = values.get(column)
        if text is None:
            return default
        try:
            return convert(text)
        except ValueError as exc:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise CompareError(f'{path}: line {line}, column "{column}": {shown!r} {exc}; {UNMODIFIED}') from None

    return Row(tag, values["name"], get("step", _int), {op: get(op, _float) for op in ops}, get("shape", _shape),
               get("dtype", _dtype), get("micro_step", _optional_int), get("vpp_stage", _optional_int) or 0,
               resolution)


def _int(text: str) -> int:
    if not re.fullmatch(r"\s*-?\d{1,18}\s*", text):
        raise ValueError("is not an integer")
    return int(text)


def _optional_int(text: str) -> int | None:
    return _int(text) if text.strip() else None


def _float(text: str) -> float:
    if text.strip() in ("", "None"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ValueError("is not a number") from None


def _shape(text: str) -> tuple[int, ...] | None:
    if text.strip() == "nan":
        return None
    dims = re.findall(r"\d+", text)
    if any(len(d) > 18 for d in dims):
        raise ValueError("is not a shape (like [4, 8], or nan)")
    return tuple(int(d) for d in dims)


def _dtype(text: str) -> str | None:
    return None if text == "nan" else text
