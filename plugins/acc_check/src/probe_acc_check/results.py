"""The two result CSVs in msprobe's columns, resuming them, and the summary read back from them.

``accuracy_checking_result_{timestamp}.csv`` has one row per API,
``accuracy_checking_details_{timestamp}.csv`` one per output. An API's rows
are written in one go (details first, then its result row) and flushed, so a
run killed at any moment leaves at most one API half-written; resuming
(``-csv_path``) drops such a half-written API and appends after the last
complete one, so the files end as an uninterrupted run's would.
"""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

from probe_core.api import create_exclusive, prepare_output_dir, writing

from probe_acc_check.errors import AccCheckError
from probe_acc_check.judge import ApiResult, DetailRow
from probe_acc_check.standards import ERROR, PASS, SKIP, WARNING

RESULT_COLUMNS = ("API Name", "Forward Test Success", "Backward Test Success", "Message")
#: (column, Metrics field) of the metric columns, between "Shape" and "Standard".
METRIC_COLUMNS = (
    ("Cosine", "cosine"), ("MaxAbsErr", "max_abs_err"), ("MaxRelativeErr", "max_rel_err"),
    ("One Hundredth Err Ratio", "hundredth"), ("One Thousandth Err Ratio", "thousandth"),
    ("One Ten-Thousandth Err Ratio", "ten_thousandth"), ("Inf/Nan Err Ratio", "inf_nan_err"),
    ("Small Value Err Ratio", "small_value_err"), ("RMSE", "rmse"), ("EB", "eb"),
    ("MeanRelativeErr", "mean_rel_err"), ("Binary Err Ratio", "binary_err"), ("ULP Err Max", "ulp_max"),
    ("ULP Err Mean", "ulp_mean"), ("ULP Err Ratio", "ulp_ratio"),
)
DETAIL_COLUMNS = (("API Name", "Bench Dtype", "Tested Dtype", "Shape") + tuple(c for c, _ in METRIC_COLUMNS)
                  + ("Standard", "Status", "Message"))
RESULT_NAME = re.compile(r"^accuracy_checking_result_(\d+)\.csv$")
NA = "N/A"


def fmt(value: float | None) -> str:
    return NA if value is None else format(value, ".10g")


def api_of(row_name: str) -> str:
    """``Functional.gelu.0.forward.output.1`` -> ``Functional.gelu.0``."""
    return row_name.rsplit(".", 3)[0]


def csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _detail(row: DetailRow) -> list[str]:
    metrics = [fmt(getattr(row.metrics, field)) for _, field in METRIC_COLUMNS]
    return [row.name, row.bench_dtype, row.tested_dtype, row.shape, *metrics, row.standard, row.status, row.message]


#: What a status cell may hold (msprobe writes ``SKIP``; an API with no backward leaves it empty).
STATUSES = frozenset({PASS, WARNING, ERROR, SKIP, ""})
_STATUS_COLUMNS = ("Forward Test Success", "Backward Test Success", "Status")
_FIX = "pass the accuracy_checking_result_{timestamp}.csv (or _details_) a probe or msprobe acc-check wrote"


def _read(path: Path, columns: tuple[str, ...]) -> list[list[str]]:
    """The complete rows of a result file (header and status cells checked; a torn last line dropped)."""
    if not path.is_file():
        raise AccCheckError(f"{path}: no such regular file; {_FIX}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise AccCheckError(f"{path}: not UTF-8 text (byte {exc.start}); {_FIX}") from None
    except OSError as exc:
        raise AccCheckError(f"{path}: cannot read ({exc.strerror}); {_FIX}") from None
    complete = text if text.endswith("\n") else text[:text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(complete))
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise AccCheckError(f"{path}, line {reader.line_num}: {exc}; {_FIX}") from None
    if not rows or tuple(rows[0]) != columns:
        raise AccCheckError(f"{path}: not a probe acc-check file (its header is not {', '.join(columns[:4])}, ...); "
                            f"{_FIX}")
    checked = [(at, column) for at, column in enumerate(columns) if column in _STATUS_COLUMNS]
    for line, row in enumerate(rows[1:], start=2):
        for at, column in checked:
            if len(row) == len(columns) and row[at] not in STATUSES:
                raise AccCheckError(f"{path}, line {line}: {column} {row[at][:40]!r} is not a status "
                                    f"({', '.join(sorted(s for s in STATUSES if s))} or empty); {_FIX}")
    return [row for row in rows[1:] if len(row) == len(columns)]


def claim_files(out: str | Path, prefix: str, headers: dict[str, tuple[str, ...]]) -> tuple[Path, ...]:
    """Create ``{prefix}_{kind}_{timestamp}.csv`` for each ``kind`` of ``headers`` (written with its header)
    in the folder ``out`` (checked first: ``-o``), all with one timestamp that no other run holds: each file is
    created exclusively, and a timestamp taken by another run moves on by one."""
    folder = prepare_output_dir(out, flag="-o")
    stamp = int(time.strftime("%Y%m%d%H%M%S"))
    while True:
        created: list[Path] = []
        try:
            with writing(f"the results in {folder}"):
                for kind, columns in headers.items():
                    path, handle = create_exclusive(folder, f"{prefix}_{kind}_{stamp}.csv", exact=True,
                                                    encoding="utf-8", newline="")
                    created.append(path)
                    with handle:
                        handle.write(csv_text([list(columns)]))
            return tuple(created)
        except FileExistsError:
            for path in created:
                path.unlink(missing_ok=True)
            stamp += 1


class ResultFiles:
    """The result and details CSVs of one run (created, or reopened to resume)."""

    def __init__(self, result: Path, details: Path) -> None:
        self.result, self.details = result, details
        self.folder = result.parent

    @classmethod
    def create(cls, out: str | Path) -> ResultFiles:
        details, result = claim_files(out, "accuracy_checking", {"details": DETAIL_COLUMNS,
                                                                  "result": RESULT_COLUMNS})
        return cls(result, details)

    @classmethod
    def resume(cls, csv_path: str | Path) -> tuple[ResultFiles, set[str]]:
        """Reopen an interrupted run's files; returns them and the names of the APIs already done."""
        result = Path(csv_path)
        match = RESULT_NAME.match(result.name)
        if not match:
            raise AccCheckError(f"{result}: -csv_path takes the accuracy_checking_result_{{timestamp}}.csv of the "
                                f"interrupted run (keep its name: the details file is found by its timestamp)")
        files = cls(result, result.with_name(f"accuracy_checking_details_{match.group(1)}.csv"))
        results = _read(result, RESULT_COLUMNS)
        done = {row[0] for row in results}
        details = [row for row in _read(files.details, DETAIL_COLUMNS) if api_of(row[0]) in done]
        try:  # drop what a killed run left half-written
            files.details.write_text(csv_text([list(DETAIL_COLUMNS), *details]), encoding="utf-8")
            files.result.write_text(csv_text([list(RESULT_COLUMNS), *results]), encoding="utf-8")
        except OSError as exc:
            raise AccCheckError(f"{files.folder}: cannot write the results there ({exc.strerror})") from None
        return files, done

    def write(self, result: ApiResult) -> None:
        """Append one API: its details rows, then its result row (each file closed, so a kill loses no row)."""
        for path, rows in ((self.details, [_detail(row) for row in result.rows]),
                           (self.result, [[result.name, result.forward, result.backward, result.message]])):
            if not rows:
                continue
            try:
                with open(path, "a", encoding="utf-8", newline="") as handle:
                    handle.write(csv_text(rows))
            except OSError as exc:
                raise AccCheckError(f"{path}: cannot append ({exc.strerror}); free the space or fix the folder, "
                                    f"then resume with --result_csv_path {self.result}") from None

    def results(self) -> list[dict[str, str]]:
        return [dict(zip(RESULT_COLUMNS, row)) for row in _read(self.result, RESULT_COLUMNS)]

    def details_rows(self) -> list[dict[str, str]]:
        return [dict(zip(DETAIL_COLUMNS, row)) for row in _read(self.details, DETAIL_COLUMNS)]
