"""The columnar compare: the plain entries of a chunk compared at once, as arrays.

Most entries of a statistics dump are *plain*: both sides hold the same leaves in the same order, every
leaf a tensor whose four statistics are numbers, with equal dtype, shape and requires_grad, or a number
argument (a dim, an eps) of equal value. The rules of every mode (:mod:`probe_core.compare.rules`) pass on
such an entry, so what is left is arithmetic: the data mode turns a chunk's rows into its column form
(``DataMode.columns``), then each comparator's columns (``compare_columns``) and the mode's discrepancy
(``discrepancy_columns``) are computed over every row at once, not one Python call per row and metric.

Each entry is read into a *compact form* as it is decoded: its **signature** (per leaf: name suffix, role,
type, dtype, shape, requires_grad, and an argument's value), interned so that the many entries alike share
one tuple, and its statistics, four numbers per leaf. An entry that does not fit (a leaf with a data file,
a statistic that is no number, a null, ...) has none. The bench keeps its compact forms from the pass that
indexes it (:meth:`ColumnarCompare.index`), so a plain entry's bench side is decoded once, not again by its
byte span; two entries are plain together when their signatures are the same object.

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
from probe_core.dump import DumpEntry, EntryRef, RankDump
from probe_core.dump.leaves import SECTIONS, TensorMeta
from probe_core.modes import DataMode

#: one plain entry's compared rows and each row's discrepancy
Plain = tuple[list[RowResult], list[float]]
#: an entry's compact form: (interned signature, its statistics: four numbers per leaf)
Form = tuple[tuple, tuple]
MAX_FORM_DEPTH = 16  # deeper nesting takes the row path (leaves_of walks up to 64 levels)


class Forms:
    """Reads entries into compact forms; one per compare, so that equal signatures are one object."""

    def __init__(self) -> None:
        self.signatures: dict[tuple, tuple] = {}
        self.plain: set[int] = set()  # ids of the signatures a plain entry can have (leaves, unique names)

    def __call__(self, name: str, data: Any) -> Form | None:
        """The compact form of entry ``name`` (its dump.json value ``data``), ``None`` when it has none."""
        if type(data) is not dict or name.endswith(".debug"):
            return None
        descs: list[tuple] = []
        stats: list[Any] = []
        if ".parameters_grad" in name and not any(key in data for key, _, _ in SECTIONS):
            if not _walk(data, "", "parameters_grad", False, 0, descs, stats):
                return None
        else:
            for key, role, suffix in SECTIONS:
                if key in data and not _walk(data[key], suffix, role, True, 0, descs, stats):
                    return None
        found = tuple(descs)
        signature = self.signatures.get(found)
        if signature is None:
            signature = self.signatures[found] = found
            if found and len({desc[0] for desc in found}) == len(found):
                self.plain.add(id(signature))
        return signature, tuple(stats)


def _walk(node: Any, suffix: str, role: str, index_lists: bool, depth: int, descs: list, stats: list) -> bool:
    """:func:`probe_core.dump.leaves.leaves_of`'s walk, for the leaves a compact form holds; False on any
    other (a null, a bare value, deep nesting)."""
    if depth > MAX_FORM_DEPTH:
        return False
    kind = type(node)
    if kind is list:
        for i, item in enumerate(node):
            child = f"{suffix}.{i}" if index_lists else suffix
            if type(item) is dict:
                leaf_type = item.get("type")
                if type(leaf_type) is str:  # the common case, without recursion
                    if not _leaf(item, leaf_type, child, role, descs, stats):
                        return False
                    continue
            if not _walk(item, child, role, index_lists, depth + 1, descs, stats):
                return False
        return True
    if kind is not dict:
        return False
    leaf_type = node.get("type")
    if type(leaf_type) is str:
        return _leaf(node, leaf_type, suffix, role, descs, stats)
    for key, item in node.items():
        if not _walk(item, f"{suffix}.{key}", role, index_lists, depth + 1, descs, stats):
            return False
    return True


def _leaf(node: dict, leaf_type: str, suffix: str, role: str, descs: list, stats: list) -> bool:
    """One leaf as :func:`probe_core.dump.leaves._leaf` reads it, when it is sound and all numbers (a bool is
    no statistic here: its rows take the row path)."""
    grad = node.get("requires_grad")
    if "data_name" in node or (grad is not None and grad.__class__ is not bool):
        return False
    get = node.get
    if "Tensor" in leaf_type or ("dtype" in node and "shape" in node and "value" not in node):
        dtype, shape = get("dtype"), get("shape")
        values = (get("Max"), get("Min"), get("Mean"), get("Norm"))
        if dtype.__class__ is not str or shape.__class__ is not list:
            return False
        for value in values:
            kind = value.__class__
            if kind is not float and kind is not int:
                return False
        for size in shape:
            if size.__class__ is not int or size < 0:
                return False
        descs.append((suffix, role, leaf_type, dtype, tuple(shape), grad, None))
        stats.extend(values)
        return True
    value = get("value")
    kind = value.__class__
    if (kind is not float and kind is not int) or value != value:  # NaN: never equal, the row path says so
        return False
    descs.append((suffix, role, leaf_type, leaf_type, (), grad, (kind, value)))
    stats.extend((value, value, value, value))
    return True


def _leaves(name: str, form: Form) -> list[TensorMeta]:
    """The :class:`TensorMeta` leaves of a compact form (as :meth:`DumpEntry.leaves` gives them)."""
    signature, stats = form
    out = []
    make = tuple.__new__  # TensorMeta's own __new__ is a Python call per leaf
    for i, (suffix, role, leaf_type, dtype, shape, grad, argument) in enumerate(signature):
        at = 4 * i
        if argument is None:
            out.append(make(TensorMeta, (name + suffix, role, leaf_type, dtype, shape, *stats[at:at + 4], grad, None,
                                         None, None, True, None)))
        else:
            value = stats[at]
            out.append(make(TensorMeta, (name + suffix, role, leaf_type, dtype, shape, value, value, value, value,
                                         grad, None, None, value, False, None)))
    return out


class ColumnarCompare:
    """The columnar path of one compare: which entries it takes and their rows, chunk by chunk."""

    def __init__(self, mode: DataMode, comparators: Sequence[Any], rules: str, name_map: Any = None,
                 postprocess: Any = None) -> None:
        self.mode, self.comparators, self.postprocess = mode, list(comparators), postprocess
        self.active = (name_map is None and postprocess is None and rules == "noise" and mode.measures_noise()
                       and bool(self.comparators) and all(c.columnar and c.judge is None for c in self.comparators)
                       and type(mode).columns is not DataMode.columns)
        self.forms = Forms()
        self.bench_forms: list[Form | None] = []

    def index(self, bench: RankDump) -> list[EntryRef]:
        """The bench's index; when the path is active, with each entry's compact form from the same pass."""
        if not self.active:
            return bench.index()
        refs, self.bench_forms = bench.index_with(self.forms)
        return refs

    def compare(self, pairs: Sequence[tuple[DumpEntry | None, EntryRef | None]]) -> list[Plain | None]:
        """For each (target entry, bench ref), its rows and discrepancies when the entry is plain, else
        ``None`` (the row path then loads the bench entry)."""
        if not self.active:
            return [None] * len(pairs)
        found = []
        for npu, ref in pairs:
            theirs = self.bench_forms[ref.index] if npu is not None and ref is not None else None
            found.append(self._leaf_pairs(npu, ref.name, theirs) if theirs is not None else None)  # type: ignore
        return self._plain(found)

    def compare_entries(self, pairs: Sequence[tuple[DumpEntry, DumpEntry]]) -> list[Plain | None]:
        """:meth:`compare` for entries both read already (``probe graph``'s nodes)."""
        if not self.active:
            return [None] * len(pairs)
        found = []
        for npu, bench in pairs:
            theirs = self.forms(bench.name, bench.data)
            found.append(self._leaf_pairs(npu, bench.name, theirs) if theirs is not None else None)
        return self._plain(found)

    def _leaf_pairs(self, npu: DumpEntry, bench_name: str, theirs: Form) -> list[tuple[TensorMeta, TensorMeta]] | None:
        """The leaf pairs of a plain entry (``theirs``: its bench's form), ``None`` when it is not plain."""
        ours = self.forms(npu.name, npu.data)
        if ours is None or ours[0] is not theirs[0] or id(ours[0]) not in self.forms.plain \
                or _is_redundant(api_op(npu.name)):
            return None
        return list(zip(_leaves(npu.name, ours), _leaves(bench_name, theirs)))

    def _plain(self, leaves: list[list[tuple[TensorMeta, TensorMeta]] | None]) -> list[Plain | None]:
        rows = [pair for found in leaves if found is not None for pair in found]
        if not rows:
            return [None] * len(leaves)
        computed = self._columns(rows)
        if computed is None:
            return [None] * len(leaves)
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
