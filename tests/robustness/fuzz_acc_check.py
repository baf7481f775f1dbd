"""Fuzz target of the acc-check result readers (``--result_csv_path`` resume, ``probe acc-check compare``):
whatever a result or details CSV holds, reading it returns or raises a :class:`~probe_core.errors.ProbeError`,
never anything else.

Picked up by ``tests/robustness/test_fuzz.py`` (see ``fuzz_targets.all_targets``)."""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.fuzz_targets import _allowed, mutated


def _csv(rows: list[list[str]]) -> bytes:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue().encode("utf-8", "surrogatepass")


def _bases() -> tuple[bytes, bytes]:
    from probe_acc_check.results import DETAIL_COLUMNS, RESULT_COLUMNS

    result = _csv([list(RESULT_COLUMNS), ["Functional.relu.0", "pass", "pass", ""],
                   ["Tensor.add_.0", "error", "", "MaxRelativeErr 3"]])
    row = ["Functional.relu.0.forward.output.0", "torch.float64", "torch.float32", "[2, 3]"]
    details = _csv([list(DETAIL_COLUMNS), row + ["1.0"] * (len(DETAIL_COLUMNS) - 7) + ["benchmark", "pass", ""]])
    return result, details


fields = st.sampled_from(["", "pass", "SKIP", "error", "maybe", "N/A", "nan", "inf", "1e999", '"', "\n", "9" * 40,
                        "thousandth", "binary_consistency", "ulp", "benchmark"]) | \
    st.text(max_size=10)


statuses = st.sampled_from(["pass", "warning", "error", "SKIP", "", "maybe", "PASS"])
standards = st.sampled_from(["thousandth", "binary_consistency", "absolute_threshold", "ulp", "benchmark", "", "x"])


def _rows_of(columns: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    """A well-formed file of ``columns`` whose cells are drawn: statuses and standards where they go, numbers
    and junk elsewhere."""
    cell = {"Status": statuses, "Forward Test Success": statuses, "Backward Test Success": statuses,
            "Standard": standards}
    row = st.tuples(*(cell.get(column, fields) for column in columns)).map(list)
    return st.lists(row, max_size=4).map(lambda rows: _csv([list(columns), *rows]))


def acc_check_csvs(settings: Any) -> Callable[[], None]:
    from probe_acc_check.results import DETAIL_COLUMNS, RESULT_COLUMNS

    result, details = _bases()

    @settings
    @given(mutated(result) | _rows_of(RESULT_COLUMNS) | st.binary(max_size=100),
           mutated(details) | _rows_of(DETAIL_COLUMNS))
    def prop(result_bytes: bytes, details_bytes: bytes) -> None:
        from probe_acc_check.precision_compare import compare_results
        from probe_acc_check.results import ResultFiles

        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            res, det = folder / "accuracy_checking_result_1.csv", folder / "accuracy_checking_details_1.csv"
            res.write_bytes(result_bytes)
            det.write_bytes(details_bytes)
            _allowed(lambda: ResultFiles.resume(res))
            det.write_bytes(details_bytes)
            _allowed(lambda: compare_results(det, det, folder / "cmp"))

    return prop


TARGETS = {"acc-check CSVs": acc_check_csvs}
EXAMPLES = {"acc-check CSVs": 150}
