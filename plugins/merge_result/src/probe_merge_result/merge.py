"""``probe merge-result``: one table per metric across the ranks' compare results (msprobe's ``merge_result``).

Input: a folder holding one compare result per rank, named as probe and msprobe name them,
``compare_result_rank{R}_{14-digit timestamp}.xlsx`` (``.csv`` too: probe's default); a YAML::

    api: [Distributed.all_reduce, Functional.linear]      # whose rows to merge (NPU Name holds "{api}.")
    compare_index: [Max diff, Cosine]                      # optional: default every metric of the mode

Output: ``multi_ranks_compare_merge_{timestamp}.xlsx``, one sheet per metric, a row per tensor name and a
column per rank (``rank0``, ``rank1``, ...). Where a metric is ``N/A``, ``unsupported`` or ``Nan`` (a
non-tensor argument such as a process group) the cell shows both sides' max instead, as msprobe does.
Single-rank results (``compare_result_rank_{timestamp}``) need no merge and are skipped; md5 results hold
no metric and are refused.
"""

from __future__ import annotations

import csv
import io
import re
import time
import warnings
from pathlib import Path
from typing import Any

from probe_compare.api import NA, StreamingXlsx, read_first_sheet
from probe_core.api import CompareError, output_folder, writing

#: a result's name; ``_{n}`` after the stamp: a second result written in the same second (never over the first)
RESULT_NAME = re.compile(r"^compare_result_rank(\d*)(?:-rank\d+)?_(\d{14})(?:_(\d+))?\.(xlsx|csv)$")
STATISTICS_INDEX = ("Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                    "MeanRelativeErr", "NormRelativeErr")
TENSOR_INDEX = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                "Five Thousandths Err Ratio")
CONSISTENT = "Requires_grad Consistent"
NO_VALUE = (NA, "unsupported", "Nan", "", None)


def _warn(message: str) -> None:
    from probe_core.api import ProbeWarning

    warnings.warn(message, ProbeWarning, stacklevel=3)


def result_files(folder: Path) -> dict[int, Path]:
    """``{rank: result file}`` in ``folder``: the newest per rank, XLSX before CSV of the same stamp."""
    if not folder.is_dir():
        raise CompareError(f"-i {folder}: no such folder; give the folder probe compare (or msprobe compare) wrote")
    found: dict[int, tuple[str, int, bool, Path]] = {}
    for path in sorted(folder.iterdir()):
        match = RESULT_NAME.match(path.name)
        if match is None:
            continue
        rank, stamp, again, suffix = match.groups()
        if rank == "":
            _warn(f"{path}: a single-rank result (no rank number) needs no merge; skipped")
            continue
        key = (stamp, int(again or 0), suffix == "xlsx")
        if int(rank) not in found or key > found[int(rank)][:3]:
            found[int(rank)] = (*key, path)  # type: ignore[assignment]
    if len(found) < 2:
        raise CompareError(f"-i {folder}: {len(found)} per-rank compare result(s) (compare_result_rank{{R}}_"
                           "{timestamp}.xlsx/.csv); merging needs the results of two ranks or more")
    return {rank: entry[3] for rank, entry in sorted(found.items())}


_REWRITE = "run probe compare (or msprobe compare) again to rewrite it"


def read_table(path: Path) -> list[dict[str, Any]]:
    """A result's rows as ``{column: cell}`` (CSV cells that spell numbers as numbers, as the XLSX holds them).
    A damaged file is one :class:`CompareError` line naming it, the row and what to do."""
    if path.suffix == ".csv":
        return _read_csv(path)
    rows = read_first_sheet(path)
    if not rows:
        return []
    header = [str(h) for h in rows[0]]
    return [dict(zip(header, row + [None] * (len(header) - len(row)))) for row in rows[1:]]


def _read_csv(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CompareError(f"{path}: line {line}: byte 0x{data[exc.start]:02x} is not UTF-8 (compare results are "
                           f"UTF-8); {_REWRITE}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        table = []
        for row in reader:
            if not row:  # a blank line
                continue
            if len(row) != len(header):
                name = row[0] if row else ""
                raise CompareError(f"{path}: line {reader.line_num} ({name[:60]!r}) has {len(row)} cells where the "
                                   f"header has {len(header)}; the file is cut short or damaged: {_REWRITE}")
            table.append(dict(zip(header, map(_number, row))))
    except csv.Error as exc:
        raise CompareError(f"{path}: line {reader.line_num}: {exc}; {_REWRITE}") from None
    return table


def _number(text: str) -> Any:
    """A CSV cell as the number it spells (as the XLSX holds it), else the text."""
    try:
        return float(text) if text.strip() not in ("", "nan", "inf", "-inf") else text
    except ValueError:
        return text


def read_config(path: Path) -> tuple[list[str], list[str]]:
    """(api names, compare indexes) of the merge YAML."""
    from probe_core.api import load_yaml

    shape = "api: [Distributed.all_reduce, ...] and optionally compare_index: [Max diff, ...]"
    data = load_yaml(path, flag="-config", error=CompareError, hint=f"expected {shape}")
    if not isinstance(data, dict) or not data.get("api"):
        raise CompareError(f"-config {path}: key 'api' is missing or empty; expected {shape}")
    apis, indexes = data.get("api"), data.get("compare_index") or []
    for key, value in (("api", apis), ("compare_index", indexes)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CompareError(f"-config {path}: key '{key}' must be a list of names; expected {shape}")
    return apis, indexes


def _mode_indexes(header: list[str], path: Path) -> tuple[str, ...]:
    if "Max diff" in header:
        return STATISTICS_INDEX + (CONSISTENT,)
    if "Cosine" in header:
        return TENSOR_INDEX + (CONSISTENT,)
    if "NPU MD5" in header:
        raise CompareError(f"{path}: an md5 compare result holds no metric to merge; merge statistics or tensor "
                           "compare results")
    raise CompareError(f"{path}: not a compare result (no 'Max diff' or 'Cosine' column)")


def merge_results(folder: Path, output: Path, config: Path) -> Path:
    """Merge the per-rank results in ``folder`` as ``config`` asks; return the XLSX written in ``output`` (a
    folder checked before any work)."""
    with output_folder(output, flag="-o") as out:
        return _merge(folder, out, config)


def _merge(folder: Path, output: Path, config: Path) -> Path:
    apis, wanted = read_config(config)
    files = result_files(folder)
    tables = {rank: read_table(path) for rank, path in files.items()}
    first = next(iter(tables.values()))
    header = list(first[0]) if first else []
    allowed = _mode_indexes(header, files[min(files)])
    bad = [index for index in wanted if index not in allowed]
    if bad:
        raise CompareError(f"-config {config}: compare_index {bad} is not a metric of these results; "
                           f"choose from {list(allowed)}")
    indexes = wanted or list(allowed)
    patterns = [re.compile(re.escape(api + ".")) for api in apis]
    merged: dict[str, dict[str, dict[int, Any]]] = {index: {} for index in indexes}
    for rank, rows in tables.items():
        for row in rows:
            name = str(row.get("NPU Name") or "")
            if not name or name == NA or not any(p.search(name) for p in patterns):
                continue
            for index in indexes:
                value = row.get(index)
                if value in NO_VALUE and "NPU max" in row:
                    value = f"NPU:{row.get('NPU max')}  Bench:{row.get('Bench max')}"
                merged[index].setdefault(name, {})[rank] = value
    if not any(merged.values()):
        raise CompareError(f"-config {config}: none of the APIs {apis} occurs in the results in {folder}")
    name = f"multi_ranks_compare_merge_{time.strftime('%Y%m%d%H%M%S')}.xlsx"
    ranks = sorted(tables)
    with writing(f"{name} in {output}"):
        book = StreamingXlsx(output / name, ["NPU Name"] + [f"rank{r}" for r in ranks], {}, sheet_name=indexes[0])
        for i, index in enumerate(indexes):
            if i:
                book.start_sheet(index)
            for row_name, by_rank in merged[index].items():
                book.write([row_name] + [by_rank.get(r, NA) for r in ranks])
        book.close()
    return book.path
