"""Fuzz target of ``probe merge-result``'s readers (issue 32, item 3): whatever a per-rank result holds (a CSV
cut short, bytes that are not UTF-8, an XLSX that is no zip, damaged sheet XML, a DOCTYPE declaring entities),
the merge writes its table or stops with a :class:`~probe_core.errors.ProbeError` line, nothing else.

Picked up by ``tests/robustness/test_fuzz.py`` and ``scripts/fuzz_readers.py`` (see ``fuzz_targets``).
"""

from __future__ import annotations

import atexit
import io
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.compare.dumps import tiny_model_entries, write_dump
from tests.robustness.fuzz_targets import _allowed, _registry, mutated

CONFIG = "api: [Functional.linear, Functional.relu]\n"
SHEET = "xl/worksheets/sheet1.xml"
#: declarations a hostile sheet may open with: the merge must refuse them, not expand them
DOCTYPES = [b'<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
            b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>',
            b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>', b"<!DOCTYPE worksheet>"]

_CACHE: dict[str, Path] = {}


def _results() -> Path:
    """A real compare's per-rank results, CSV and XLSX, of two ranks (built once per process)."""
    if "results" not in _CACHE:
        from probe_compare.engine import CompareOptions, run_compare

        root = Path(tempfile.mkdtemp(prefix="probe-fuzz-merge-"))
        atexit.register(shutil.rmtree, root, True)
        for side, scale in (("t", 1.01), ("b", 1.0)):
            for rank in (0, 1):
                write_dump(root / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank else 1.0))
        run_compare(CompareOptions(root / "t", root / "b", root / "out", xlsx=True, progress=False,
                                   stamp="20260101000000"), _registry())
        (root / "merge.yaml").write_text(CONFIG)
        _CACHE["results"] = root
    return _CACHE["results"]


def _result(rank: int, suffix: str) -> Path:
    return _results() / "out" / f"compare_result_rank{rank}_20260101000000{suffix}"


def _with_sheet(xlsx: bytes, sheet: bytes) -> bytes:
    """The XLSX ``xlsx`` with its first sheet's XML replaced by ``sheet``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(xlsx)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename, sheet if info.filename == SHEET else source.read(info.filename))
    return out.getvalue()


def _with_doctype(sheet: bytes, doctype: bytes) -> bytes:
    head, _, body = sheet.partition(b"?>")
    return head + b"?>" + doctype + body.replace(b"<t xml:space=\"preserve\">", b"<t>&c;", 1)


def merge_inputs(settings: Any) -> Callable[[], None]:
    csv = _result(1, ".csv").read_bytes()
    xlsx = _result(1, ".xlsx").read_bytes()
    with zipfile.ZipFile(io.BytesIO(xlsx)) as book:
        sheet = book.read(SHEET)
    sheets = (mutated(sheet) | st.sampled_from(DOCTYPES).map(lambda d: _with_doctype(sheet, d))
              | st.binary(max_size=80)).map(lambda s: _with_sheet(xlsx, s))
    files = (st.tuples(st.just(".csv"), mutated(csv) | st.binary(max_size=80))
             | st.tuples(st.just(".xlsx"), mutated(xlsx) | sheets))

    @settings
    @given(files)
    def prop(file: tuple[str, bytes]) -> None:
        from probe_merge_result.merge import merge_results

        suffix, data = file
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "results"
            folder.mkdir()
            shutil.copy(_result(0, suffix), folder)
            (folder / _result(1, suffix).name).write_bytes(data)
            _allowed(lambda: merge_results(folder, Path(tmp) / "merged", _results() / "merge.yaml"))

    return prop


TARGETS: dict[str, Callable[[Any], Callable[[], None]]] = {"merge-result inputs": merge_inputs}
EXAMPLES = {"merge-result inputs": 150}
