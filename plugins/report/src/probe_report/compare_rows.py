"""The rows of one ``compare_result_rank*.csv`` (msprobe's columns) grouped into entries, each with its error.

A row is one tensor, ``{entry}.{input|output|parameters|kwargs}.{i}`` or ``{module}.parameters_grad.{n}.{name}``.
A row's **discrepancy** is relative, as the statistics mode judges it: Max and Min against the larger
magnitude of both sides, Mean against the root mean square (Norm / sqrt(n)), Norm against itself; in tensor
mode MaxAbsErr against the magnitude too; where no number can tell (md5), 1 for a row that differs and 0
for one that passes. An entry's error is the worst of its outputs; the error it **adds** is that minus
the worst of its inputs and parameters (never below 0).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from probe_core.api import CompareError
from probe_report.model import number

ROW = re.compile(r"^(?P<entry>.+?\.(?:forward|backward)(?:\.\d+)?)\.(?P<io>input|output|parameters|kwargs)\b")
PARAMS_GRAD = re.compile(r"^(?P<entry>.+?\.parameters_grad(?:\.\d+)?)\.")
STATS = ("max", "min", "mean", "l2norm")
#: results from the worst down: an entry takes the worst of its rows
SEVERITY = {"error": 4, "diff": 4, "unmatched": 3, "warning": 2, "pass": 1, "match": 1}
NAME_COLUMN = "NPU Name"


def split_name(name: str) -> tuple[str, str]:
    """``(entry, io)`` of a row name: ``Functional.gelu.0.forward.output.0`` -> (``Functional.gelu.0.forward``,
    ``output``); a name of no known form is its own entry (io ``""``)."""
    match = ROW.match(name) or PARAMS_GRAD.match(name)
    if match is None:
        return name, ""
    return match["entry"], match.groupdict().get("io") or "parameters_grad"


def _count(shape: str) -> int:
    dims = [int(d) for d in re.findall(r"\d+", shape or "")]
    return math.prod(dims) if dims else 1


def discrepancy(row: dict[str, str]) -> float | None:
    """The row's relative discrepancy (see the module docstring); ``None`` when the row tells none."""
    a = [number(row.get(f"NPU {s}", "")) for s in STATS]
    b = [number(row.get(f"Bench {s}", "")) for s in STATS]
    if all(v is not None for v in a + b):
        if any(math.isfinite(x) != math.isfinite(y) or (math.isnan(x) != math.isnan(y)) for x, y in zip(a, b)):
            return math.inf
        if not all(math.isfinite(v) for v in a + b):
            return 0.0  # the same NaN/Inf on both sides
        magnitude = max(abs(a[0]), abs(a[1]), abs(b[0]), abs(b[1]))
        rms = abs(b[3]) / math.sqrt(max(_count(row.get("Bench Tensor Shape", "")), 1))
        worst = 0.0
        for x, y, scale in zip(a, b, (magnitude, magnitude, rms, max(abs(a[3]), abs(b[3])))):
            if x != y:
                worst = max(worst, abs(x - y) / scale if scale > 0 else math.inf)
        abs_err = number(row.get("MaxAbsErr", ""))
        if abs_err is not None and magnitude > 0:
            worst = max(worst, abs(abs_err) / magnitude)
        return worst
    result = row.get("Result", "").strip().lower()
    if result in SEVERITY:
        return 1.0 if SEVERITY[result] >= 3 else 0.0
    return None


@dataclass
class Entry:
    """One entry of one rank and step: its rows (indices into the file's rows) and what they add up to."""

    name: str
    rows: list[int] = field(default_factory=list)
    result: str = "pass"
    output_error: float | None = None
    input_error: float | None = None

    @property
    def error(self) -> float | None:
        return self.output_error if self.output_error is not None else self.input_error

    @property
    def added(self) -> float | None:
        if self.output_error is None:
            return None
        return max(0.0, self.output_error - (self.input_error or 0.0))


def _worst(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None or value > current or math.isnan(value) else current


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every row of a compare result CSV; one error naming the file and the fix when it is no such file."""
    csv.field_size_limit(1 << 30)  # a row's NPU_Stack_Info is long
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if NAME_COLUMN not in (reader.fieldnames or ()):
                raise CompareError(f"{path}: no column '{NAME_COLUMN}' in its header; pass the output folder of "
                                   "probe compare (or msprobe compare), unmodified")
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CompareError(f"{path}: cannot be read as a compare result CSV ({exc}); run probe compare again "
                           "into a new folder") from None


def entries(rows: list[dict[str, str]]) -> dict[str, Entry]:
    """The rows grouped into entries, in the order the CSV lists them (execution order)."""
    found: dict[str, Entry] = {}
    for index, row in enumerate(rows):
        name, io = split_name(row[NAME_COLUMN])
        entry = found.setdefault(name, Entry(name))
        entry.rows.append(index)
        result = row.get("Result", "").strip().lower()
        if SEVERITY.get(result, 0) > SEVERITY.get(entry.result, 0):
            entry.result = result
        error = discrepancy(row)
        if io in ("output", "parameters_grad"):
            entry.output_error = _worst(entry.output_error, error)
        elif io in ("input", "kwargs", "parameters"):
            entry.input_error = _worst(entry.input_error, error)
    return found
