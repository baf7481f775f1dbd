"""Fuzz target of the monitor CSV reader (``probe monitor compare``): whatever one CSV of a monitor output holds,
reading and comparing it returns or raises a :class:`~probe_core.errors.ProbeError`, never anything else.

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

HEADER = ["vpp_stage", "name", "step", "micro_step", "min", "max", "mean", "norm", "shape", "dtype"]
ROWS = [["0", "fc1.input", "0", "0", "-1.5", "2.25", "0.125", "7.5", "[4, 8]", "torch.float32"],
        ["0", "fc1.output", "0", "0", "nan", "inf", "-inf", "1e-06", "[4, 16]", "torch.bfloat16"],
        ["0", ".input", "0", "1", "nan", "nan", "nan", "nan", "nan", "nan"]]
NAME = "actv_0-0.csv"


def _csv(rows: list[list[str]]) -> bytes:
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    return text.getvalue().encode("utf-8", "surrogatepass")


BASE = _csv([HEADER, *ROWS])
fields = (st.sampled_from(["", "nan", "None", "-0", "1e999", "9" * 30, "[1, 2]", "fc1.weight", '"', "\n", "1_0"])
          | st.text(max_size=12))
#: a CSV built from arbitrary fields: the header's columns and the rows' values both drawn
built = st.lists(st.lists(fields, max_size=12), max_size=5).map(
    lambda rows: _csv([HEADER[:len(rows[0])] if rows and rows[0] else HEADER, *rows]))


def _read_and_compare(folder: Path, good: Path) -> None:
    from probe_monitor.compare.diff import compare_runs
    from probe_monitor.compare.reader import rank_folders, read_rank
    from probe_monitor.compare.report import headline, not_compared

    sides = [{rank: list(read_rank(path)) for rank, path in rank_folders(side).items()} for side in (folder, good)]
    comparison = compare_runs(*sides)
    headline(comparison)
    not_compared(comparison)


def monitor_csvs(settings: Any) -> Callable[[], None]:
    @settings
    @given(mutated(BASE) | built | st.binary(max_size=120))
    def prop(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            target, good = Path(tmp) / "a" / "rank0", Path(tmp) / "b" / "rank0"
            target.mkdir(parents=True)
            good.mkdir(parents=True)
            (target / NAME).write_bytes(data)
            (good / NAME).write_bytes(BASE)
            _allowed(lambda: _read_and_compare(target.parent, good.parent))

    return prop


TARGETS: dict[str, Callable[[Any], Callable[[], None]]] = {"monitor CSVs": monitor_csvs}
EXAMPLES = {"monitor CSVs": 150}
