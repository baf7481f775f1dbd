"""Reading monitor outputs back: probe's and msprobe's CSV layout (``{tag}_{first}-{last}.csv`` per rank folder)."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from pathlib import Path

from probe_core.errors import CompareError
from probe_monitor.records import Row

FILE = re.compile(r"^(?P<tag>.+)_(?P<first>\d+)-(?P<last>\d+)\.csv$")
RANK = re.compile(r"rank_?(\d+)")
FIXED = ("vpp_stage", "name", "step", "micro_step", "shape", "dtype")


def rank_folders(path: Path) -> dict[int, Path]:
    """``{rank: folder}`` of a monitor output: the folder itself when it holds CSVs (rank from its name, else 0),
    else its sub-folders named ``rank{R}`` (``rank0``, ``rank0_out``, msprobe's ``...-rank0-...``)."""
    if not path.is_dir():
        raise CompareError(f"{path}: no such folder; pass a monitor output folder (the one holding rank folders)")
    if any(FILE.match(p.name) for p in path.iterdir()):
        match = RANK.search(path.name)
        return {int(match.group(1)) if match else 0: path}
    found: dict[int, Path] = {}
    for child in sorted(path.iterdir()):
        match = RANK.search(child.name)
        if child.is_dir() and match and any(FILE.match(p.name) for p in child.iterdir()):
            found.setdefault(int(match.group(1)), child)
    if not found:
        raise CompareError(f"{path}: no monitor CSV files ({{tag}}_{{first}}-{{last}}.csv) here or in rank folders; "
                           "pass the folder TrainerMon or probe run --task monitor wrote (default ./monitor_output)")
    return found


def read_rank(folder: Path) -> Iterator[tuple[int, Row]]:
    """``(record order, Row)`` for every row of every CSV in ``folder``; order counts within one file."""
    for path in sorted(folder.iterdir()):
        match = FILE.match(path.name)
        if not match:
            continue
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            ops = [c for c in reader.fieldnames or () if c not in FIXED]
            for order, line in enumerate(reader):
                try:
                    yield order, _row(match.group("tag"), line, ops)
                except (KeyError, ValueError) as exc:
                    raise CompareError(f"{path}: line {order + 2} is not a monitor row ({exc}); pass an unmodified "
                                       "monitor output") from None


def _row(tag: str, line: dict[str, str], ops: list[str]) -> Row:
    shape = line["shape"]
    micro = line.get("micro_step")
    return Row(tag, line["name"], int(line["step"]), {op: _float(line[op]) for op in ops},
               None if shape == "nan" else tuple(int(d) for d in re.findall(r"\d+", shape)),
               None if line["dtype"] == "nan" else line["dtype"], int(micro) if micro not in (None, "") else None,
               int(line["vpp_stage"] or 0))


def _float(text: str) -> float:
    return float(text) if text not in ("", "None") else math.nan
