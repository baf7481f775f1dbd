"""The columnar compare: the plain entries of a chunk compared at once, as arrays.

Most entries of a statistics dump are *plain*: both sides hold the same leaves in the same order, every
leaf a tensor whose four statistics are numbers, with equal dtype, shape and requires_grad strings, or a
number argument (a dim, an eps) of equal value. The rules of every mode (:mod:`probe_core.compare.rules`)
pass on such an entry, so what is left is arithmetic: the data mode turns a chunk's rows into its column
form (``DataMode.columns``), then each comparator's columns (``compare_columns``) and the mode's discrepancy
(``discrepancy_columns``) are computed over every row at once, not one Python call per row and metric.

Every other entry (one side only, a scalar, a malformed record, dtypes or shapes that differ, a redundant
API) takes the row path, :func:`probe_core.compare.engine.compare_entry`, as does everything when a name
map, tensor post-processing, ``--rules msprobe`` or a comparator without ``compare_columns`` is in play.
Both paths give the same rows and facts (``tests/compare/test_columnar.py`` holds them to it on every test
dump). The core holds no arrays itself: the columns are the mode's (the statistics mode brings numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from probe_core.compare.rules import PASS, RowResult, _is_redundant, api_op
from probe_core.dump import DumpEntry
from probe_core.dump.leaves import TensorMeta
from probe_core.modes import DataMode

#: one plain entry's compared rows and each row's discrepancy
Plain = tuple[list[RowResult], list[float]]


def _number(value: Any) -> bool:
    kind = type(value)
    return kind is float or kind is int  # bool is not a statistic here: its rows take the row path


def plain_leaves(npu: DumpEntry | None, bench: DumpEntry | None) -> list[tuple[TensorMeta, TensorMeta]] | None:
    """The leaf pairs of a plain entry, or ``None`` when the entry is not plain (see the module's docstring)."""
    if npu is None or bench is None or _is_redundant(api_op(npu.name)):
        return None
    ours, theirs = npu.leaves(), bench.leaves()
    if not ours or len(ours) != len(theirs):
        return None
    cut_n, cut_b = len(npu.name), len(bench.name)
    suffixes = set()
    for a, b in zip(ours, theirs):
        suffix = a.name[cut_n:]
        if suffix != b.name[cut_b:] or suffix in suffixes or not _plain(a, b):
            return None
        suffixes.add(suffix)
    return list(zip(ours, theirs))


def _plain(a: TensorMeta, b: TensorMeta) -> bool:
    """Two tensors with numeric statistics and equal dtype, shape and requires_grad, or two equal numbers."""
    if a.problem is not None or b.problem is not None or a.dtype != b.dtype or a.requires_grad != b.requires_grad:
        return False
    if a.is_tensor and b.is_tensor:
        return (a.shape == b.shape and a.dtype is not None and _number(a.max) and _number(a.min)
                and _number(a.mean) and _number(a.norm) and _number(b.max) and _number(b.min)
                and _number(b.mean) and _number(b.norm))
    # an argument such as a dim or an eps: the rules pass equal values, the statistics mirror the value
    return not a.is_tensor and not b.is_tensor and _number(a.value) and type(a.value) is type(b.value) \
        and a.value == b.value


class ColumnarCompare:
    """The columnar path of one compare: which entries it takes and their rows, chunk by chunk."""

    def __init__(self, mode: DataMode, comparators: Sequence[Any], rules: str, name_map: Any = None,
                 postprocess: Any = None) -> None:
        self.mode, self.comparators = mode, list(comparators)
        self.active = (name_map is None and postprocess is None and rules == "noise" and mode.measures_noise()
                       and bool(self.comparators) and all(c.columnar and c.judge is None for c in self.comparators)
                       and type(mode).columns is not DataMode.columns)

    def compare(self, pairs: Sequence[tuple[DumpEntry | None, DumpEntry | None]]) -> list[Plain | None]:
        """For each entry pair, its rows and discrepancies when the entry is plain, else ``None``."""
        if not self.active:
            return [None] * len(pairs)
        leaves = [plain_leaves(npu, bench) for npu, bench in pairs]
        rows = [pair for found in leaves if found is not None for pair in found]
        if not rows:
            return [None] * len(pairs)
        computed = self._columns(rows)
        if computed is None:
            return [None] * len(pairs)
        columns, errs = computed
        names = list(columns)
        values = list(zip(*(columns[name] for name in names))) if names else [()] * len(rows)
        out: list[Plain | None] = []
        at = 0
        for found in leaves:
            if found is None:
                out.append(None)
                continue
            end = at + len(found)
            out.append(([RowResult(a, b, dict(zip(names, values[i])), PASS) for i, (a, b) in
                         enumerate(found, start=at)], errs[at:end]))
            at = end
        return out

    def _columns(self, rows: list[tuple[TensorMeta, TensorMeta]]) -> tuple[dict[str, Sequence[Any]], list[float]] | None:
        sides = self.mode.columns(rows)
        if sides is None:
            return None
        target, bench = sides
        columns: dict[str, Sequence[Any]] = {}
        for comparator in self.comparators:
            values = comparator.run_columns(target, bench)
            if values is None:
                return None
            columns.update(values)
        errs = self.mode.discrepancy_columns(target, bench)
        if errs is None:
            return None
        return columns, list(errs)
