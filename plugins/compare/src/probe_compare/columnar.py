"""The columnar compare: the plain entries of a chunk compared at once, as arrays.

Most entries of a statistics dump are *plain*: both sides hold the same leaves in the same order, every
leaf a tensor whose four statistics are numbers, with equal dtype, shape and requires_grad, or a number
argument (a dim, an eps) of equal value. The rules of every mode (:mod:`probe_compare.rules`) pass on
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
API, a DTensor recorded as this rank's part) takes the row path,
:func:`probe_compare.entries.compare_entry`, as does everything when a name map, tensor post-processing
or ``--rules msprobe`` is in play. A comparator without ``compare_columns`` is called row by row on the plain
entries (the others keep their column form), and a comparator's ``judge`` is asked about each plain row: an
entry it raises takes the row path, so a third-party comparator costs its own rows, not the columnar path of
every entry.
Both paths give the same rows and facts (``tests/compare/test_columnar.py`` holds them to it on every test
dump). The core holds no arrays itself: the columns are the mode's (the statistics mode brings numpy).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from probe_compare.comparator import LeafPair
from probe_compare.judge import RowLayout
from probe_compare.rules import RowResult, _is_redundant, api_op, local_part
from probe_core.api import DataMode, DumpEntry, EntryRef, ProbeError, RankDump, SECTIONS, TensorMeta

#: an entry's compact form: (interned signature, its statistics: four numbers per leaf)
Form = tuple[tuple, tuple]
MAX_FORM_DEPTH = 16  # deeper nesting takes the row path (leaves_of walks up to 64 levels)


TENSOR_KEYS = ("type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad")  # a tensor leaf, as written
ARGUMENT_KEYS = ("type", "value")  # a number argument
_ABSENT = object()


class Forms:
    """Reads entries into compact forms; one per compare, so that equal signatures are one object.

    Most entries are flat: lists (or a dict) of leaves whose keys are exactly :data:`TENSOR_KEYS` or
    :data:`ARGUMENT_KEYS`, in that order. Such an entry is read by :func:`_flat`, which gathers what the
    signature depends on into a key without building it; a key seen before names its signature. Any other
    entry, and the first of each key, is read by the full walk (:func:`_walk`), which alone decides what is
    sound: a key is remembered only for an entry the walk accepted."""

    def __init__(self) -> None:
        self.signatures: dict[tuple, tuple] = {}
        self.plain: set[int] = set()  # ids of the signatures a plain entry can have (leaves, unique names)
        self.by_key: dict[tuple, tuple] = {}  # _flat's key -> its signature
        self.known: dict[bytes, tuple] = {}  # the scanner's skeleton of a flat entry -> its signature

    def __call__(self, name: str, data: Any, flat: tuple[Any, tuple] | None = None) -> Form | None:
        """The compact form of entry ``name`` (its dump.json value ``data``, or what the scanner read of it:
        ``flat``, see :class:`probe_core.dump.reader.DumpEntry`), ``None`` when it has none."""
        if flat is not None:
            found, stats = flat
            if name.endswith(".debug"):
                return None
            if found.__class__ is not bytes:
                return found, stats
            form = self(name, data)  # a skeleton met for the first time: remember its signature
            if form is not None and _same_numbers(form[1], stats):
                self.known[found] = form[0]
            return form
        if type(data) is not dict or name.endswith(".debug"):
            return None
        flat_key = _flat(data) if ".parameters_grad" not in name else None
        if flat_key is not None:
            try:
                signature = self.by_key.get(flat_key[0])
            except TypeError:  # an unhashable dtype or shape item: the walk says why it is no form
                flat_key = signature = None
            if signature is not None:
                return signature, flat_key[1]
        form = self._walked(name, data)
        if flat_key is not None and form is not None:
            self.by_key[flat_key[0]] = form[0]
        return form

    def _walked(self, name: str, data: dict) -> Form | None:
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


def _flat_python(data: dict) -> tuple[tuple, tuple] | None:
    """(key, statistics) of a flat entry, ``None`` for any other. The key holds every field the signature
    depends on (types with the values where equal values of two types would compare equal: ``True == 1``);
    the statistics are checked here, being no part of the key. :func:`_flat` is the C helper's
    (``probe_compare._flat``) where it is built, the same function."""
    key: list[Any] = []
    stats: list[Any] = []
    for section, _, _ in SECTIONS:
        value = data.get(section, _ABSENT)
        if value is _ABSENT:
            continue
        kind = value.__class__
        if kind is list:
            items: Any = value
        elif kind is dict:
            items = value.values()
        else:
            return None
        if not items:
            continue
        key.append(section)
        if kind is dict:
            key.append(tuple(value))
        for item in items:
            if item.__class__ is not dict:
                return None
            fields = tuple(item)
            if fields == TENSOR_KEYS:
                leaf_type, dtype, shape, high, low, mean, norm, grad = item.values()
                if shape.__class__ is not list or (grad is not None and grad.__class__ is not bool):
                    return None
                for size in shape:
                    if size.__class__ is not int:
                        return None
                for number in (high, low, mean, norm):
                    if number.__class__ is not float and number.__class__ is not int:
                        return None
                key.append((leaf_type, dtype, tuple(shape), grad))
                stats += (high, low, mean, norm)
            elif fields == ARGUMENT_KEYS:
                leaf_type, number = item.values()
                number_kind = number.__class__
                if number_kind is not float and number_kind is not int:
                    return None
                key.append((leaf_type, number_kind, number))
                stats += (number, number, number, number)
            else:
                return None
    return tuple(key), tuple(stats)


try:
    from probe_compare import _flat as _flat_native
except ImportError:  # built without a C compiler
    _flat, _leaves_native = _flat_python, None
else:
    _flat_native.configure(tuple(section for section, _, _ in SECTIONS), TENSOR_KEYS, ARGUMENT_KEYS)
    _flat = _flat_native.flat
    _leaves_native = _flat_native.leaves


def _same_numbers(ours: tuple, theirs: tuple) -> bool:
    """Whether two statistics tuples hold the same numbers of the same types (NaN matching NaN)."""
    return len(ours) == len(theirs) and all(
        a.__class__ is b.__class__ and (a == b or (a != a and b != b)) for a, b in zip(ours, theirs))


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
    if "placements" in node and local_part(node):  # a DTensor's local part: the rules decide whether it is
        return False  # compared (``rules.part_of_whole``), whatever the other side's signature
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


@dataclass(slots=True)
class Rows:
    """What the rows of every plain entry with one signature share: the judge's :class:`RowLayout`, each row's
    name suffix, dtype, shape, requires_grad and number of elements. ``text`` is the renderer's to keep its
    CSV cells for these rows in."""

    signature: tuple
    layout: RowLayout
    suffixes: tuple[str, ...]
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    grads: tuple[bool | None, ...]
    counts: tuple[int, ...]
    text: Any = None

    @classmethod
    def of(cls, signature: tuple, pairs: Sequence[tuple[TensorMeta, TensorMeta]]) -> Rows:
        counts = []
        for desc in signature:
            count = 1
            for size in desc[4]:
                count *= size
            counts.append(count)
        return cls(signature, RowLayout.of(pairs), tuple(d[0] for d in signature), tuple(d[3] for d in signature),
                   tuple(d[4] for d in signature), tuple(d[5] for d in signature), tuple(counts))


@dataclass(slots=True)
class Chunk:
    """The values the columnar path computed for the rows of a chunk's plain entries, in their order: each
    comparator column (``names``) and each row's discrepancy."""

    names: tuple[str, ...]
    columns: dict[str, Sequence[Any]]
    errs: Sequence[float]


@dataclass(slots=True)
class Plain:
    """A plain entry the columnar path compared (every row passes): its :class:`Rows`, both entry names, both
    sides' statistics as the compact forms hold them (four numbers per leaf: ``stats[0]`` the target's), and
    where its rows are among its chunk's (``start``). ``probe compare`` renders its rows from these directly,
    ``probe graph`` shows its metrics."""

    rows: Rows
    name: str
    bench_name: str
    stats: tuple[tuple, tuple]
    chunk: Chunk
    start: int

    @property
    def layout(self) -> RowLayout:
        return self.rows.layout

    @property
    def names(self) -> tuple[str, ...]:
        """The comparators' columns, in the order of each row of :attr:`metrics`."""
        return self.chunk.names

    @property
    def count(self) -> int:
        return len(self.rows.suffixes)

    @property
    def errs(self) -> Sequence[float]:
        return self.chunk.errs[self.start:self.start + self.count]

    @property
    def metrics(self) -> list[tuple]:
        """Each row's metric values (in :attr:`names` order)."""
        end = self.start + self.count
        return list(zip(*(self.chunk.columns[name][self.start:end] for name in self.names))) if self.names \
            else [()] * self.count

    @property
    def leaves(self) -> list[tuple[TensorMeta, TensorMeta]]:
        """Each row's (target leaf, bench leaf)."""
        signature = self.rows.signature
        return list(zip(_leaves(self.name, (signature, self.stats[0])),
                        _leaves(self.bench_name, (signature, self.stats[1]))))

    def stats_key(self, pos: int) -> tuple:
        """Row ``pos``'s target shape, dtype and statistics (the judge's key of a tensor)."""
        rows, at = self.rows, 4 * pos
        return (rows.shapes[pos], rows.dtypes[pos], *self.stats[0][at:at + 4])

    @property
    def pairs(self) -> LazyPairs:
        """:attr:`leaves`, each pair built when it is read (the judge reads a few, and may keep them to read
        later: they hold the entry's names, signature and statistics, not its chunk)."""
        return LazyPairs(self.name, self.bench_name, self.rows.signature, self.stats)


class LazyPairs:
    """The (target leaf, bench leaf) pairs of a compact form's rows, each built when read."""

    __slots__ = ("name", "bench_name", "signature", "stats")

    def __init__(self, name: str, bench_name: str, signature: tuple, stats: tuple[tuple, tuple]) -> None:
        self.name, self.bench_name, self.signature, self.stats = name, bench_name, signature, stats

    def __getitem__(self, pos: int) -> tuple[TensorMeta, TensorMeta]:
        desc = self.signature[pos]
        return _leaf_of(self.name, desc, self.stats[0], pos), _leaf_of(self.bench_name, desc, self.stats[1], pos)


class LeafPairs(Sequence):
    """The rows of a chunk's plain entries, as :meth:`DataMode.columns` receives them: a sequence of (target
    leaf, bench leaf), built when first read, and as columns: ``target_stats`` and ``bench_stats`` (four
    numbers per row, flat: Max, Min, Mean, Norm), ``counts`` (each row's number of elements) and ``dtypes``
    (each row's dtype, the same on both sides of a plain entry)."""

    def __init__(self, taken: Sequence[Plain]) -> None:
        self._taken = taken
        self._pairs: list[tuple[TensorMeta, TensorMeta]] | None = None
        self.target_stats = list(chain.from_iterable(plain.stats[0] for plain in taken))
        self.bench_stats = list(chain.from_iterable(plain.stats[1] for plain in taken))
        self.counts = list(chain.from_iterable(plain.rows.counts for plain in taken))
        self.dtypes = list(chain.from_iterable(plain.rows.dtypes for plain in taken))

    def __len__(self) -> int:
        return len(self.counts)

    def __getitem__(self, index: Any) -> Any:
        if self._pairs is None:
            self._pairs = [pair for plain in self._taken for pair in plain.leaves]
        return self._pairs[index]


class _ColumnRow(Mapping):
    """Row ``at`` of a chunk's columns as the read-only metrics a comparator's ``judge`` reads (it reads one or
    two of the fifteen: none is copied)."""

    __slots__ = ("_columns", "_at")

    def __init__(self, columns: dict[str, Sequence[Any]], at: int) -> None:
        self._columns, self._at = columns, at

    def __getitem__(self, name: str) -> Any:
        return self._columns[name][self._at]

    def get(self, name: str, default: Any = None) -> Any:
        values = self._columns.get(name)
        return default if values is None else values[self._at]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def _leaf_of(name: str, desc: tuple, stats: tuple, i: int) -> TensorMeta:
    """Leaf ``i`` of a compact form (``desc``: its signature's item ``i``) as :meth:`DumpEntry.leaves` gives it."""
    suffix, role, leaf_type, dtype, shape, grad, argument = desc
    at = 4 * i
    if argument is None:
        return tuple.__new__(TensorMeta, (name + suffix, role, leaf_type, dtype, shape, *stats[at:at + 4], grad, None,
                                          None, None, True, None))
    value = stats[at]
    return tuple.__new__(TensorMeta, (name + suffix, role, leaf_type, dtype, shape, value, value, value, value, grad,
                                      None, None, value, False, None))


def _leaves_python(name: str, form: Form) -> list[TensorMeta]:
    """The :class:`TensorMeta` leaves of a compact form (as :meth:`DumpEntry.leaves` gives them)."""
    signature, stats = form
    return [_leaf_of(name, desc, stats, i) for i, desc in enumerate(signature)]


def _leaves(name: str, form: Form) -> list[TensorMeta]:
    """:func:`_leaves_python`, by the C helper where it is built (forms hold tuples; any other is read here)."""
    signature, stats = form
    if _leaves_native is not None and stats.__class__ is tuple:
        return _leaves_native(name, signature, stats, TensorMeta)
    return _leaves_python(name, form)


_Found = tuple[Rows, str, str, tuple[tuple, tuple]]  # what _match finds of a plain entry


class ColumnarCompare:
    """The columnar path of one compare: which entries it takes and their rows, chunk by chunk."""

    def __init__(self, mode: DataMode, comparators: Sequence[Any], rules: str, name_map: Any = None,
                 postprocess: Any = None) -> None:
        self.mode, self.comparators, self.postprocess = mode, list(comparators), postprocess
        self.active = (name_map is None and postprocess is None and rules == "noise" and mode.measures_noise()
                       and bool(self.comparators) and type(mode).columns is not DataMode.columns)
        self.judges = [c for c in self.comparators if c.judge is not None]
        self.forms = Forms()
        self.bench_forms: list[Form | None] = []
        self.rows: dict[int, Rows] = {}  # id(signature) -> its rows (Forms keeps the signatures)

    def index(self, bench: RankDump) -> list[EntryRef]:
        """The bench's index; when the path is active, with each entry's compact form from the same pass."""
        if not self.active:
            return bench.index()
        refs, self.bench_forms = bench.index_with(self.forms, known=self.forms.known)
        return refs

    def entries(self, target: RankDump) -> Iterator[DumpEntry]:
        """The target's entries in execution order; when the path is active, those the scanner knows come
        flat (:meth:`RankDump.loaded` reads one back)."""
        return target.entries(known=self.forms.known if self.active else None)

    def compare(self, pairs: Sequence[tuple[DumpEntry | None, EntryRef | None]]) -> list[Plain | None]:
        """For each (target entry, bench ref), its rows and discrepancies when the entry is plain, else
        ``None`` (the row path then loads the bench entry)."""
        if not self.active:
            return [None] * len(pairs)
        found = []
        bench_forms, match = self.bench_forms, self._match
        for npu, ref in pairs:
            theirs = bench_forms[ref.index] if npu is not None and ref is not None else None
            found.append(match(npu, ref.name, theirs) if theirs is not None else None)  # type: ignore
        return self._plain(found)

    def compare_entries(self, pairs: Sequence[tuple[DumpEntry, DumpEntry]]) -> list[Plain | None]:
        """:meth:`compare` for entries both read already (``probe graph``'s nodes)."""
        if not self.active:
            return [None] * len(pairs)
        found = []
        for npu, bench in pairs:
            theirs = self.forms(bench.name, bench.data, bench.flat)
            found.append(self._match(npu, bench.name, theirs) if theirs is not None else None)
        return self._plain(found)

    def _match(self, npu: DumpEntry, bench_name: str, theirs: Form) -> _Found | None:
        """The rows and statistics of a plain entry (``theirs``: its bench's form), ``None`` when it is not
        plain."""
        name, flat = npu.name, npu.flat
        if flat is not None and flat[0].__class__ is not bytes and not name.endswith(".debug"):
            ours: Form | None = flat  # what self.forms gives of an entry the scanner knows, without the call
        else:
            ours = self.forms(name, npu.data, flat)
        signature = ours[0] if ours is not None else None
        if signature is not theirs[0] or id(signature) not in self.forms.plain or _is_redundant(api_op(name)):
            return None
        rows = self.rows.get(id(signature))
        if rows is None:
            pairs = list(zip(_leaves(npu.name, ours), _leaves(bench_name, theirs)))  # type: ignore[arg-type]
            rows = self.rows[id(signature)] = Rows.of(signature, pairs)
        return rows, npu.name, bench_name, (ours[1], theirs[1])  # type: ignore[index]

    def _plain(self, found: list[_Found | None]) -> list[Plain | None]:
        if not any(found):
            return [None] * len(found)
        chunk = Chunk((), {}, [])
        out: list[Plain | None] = []
        at = 0
        for one in found:
            if one is None:
                out.append(None)
                continue
            out.append(Plain(*one, chunk, at))
            at += len(one[0].suffixes)
        taken = [plain for plain in out if plain is not None]
        # each row's (target leaf, bench leaf), built once where a comparator reads rows one by one
        leaves = [plain.leaves for plain in taken] if self.judges or not all(
            c.columnar for c in self.comparators) else []
        computed = self._columns(LeafPairs(taken), taken, leaves)
        if computed is None:
            return [None] * len(found)
        chunk.columns, chunk.errs = computed
        chunk.names = tuple(chunk.columns)
        if self.judges:
            judged = set(self._judged(taken, leaves, chunk))
            return [None if plain is not None and plain.start in judged else plain for plain in out]
        return out

    def _columns(self, rows: LeafPairs, taken: Sequence[Plain],
                 leaves: Sequence[list[tuple[TensorMeta, TensorMeta]]]) -> tuple[dict[str, Sequence[Any]], list[float]] | None:
        sides = self.mode.columns(rows)
        if sides is None:
            return None
        target, bench = sides
        columns: dict[str, Sequence[Any]] = {}
        for comparator in self.comparators:
            values = (comparator.run_columns(target, bench) if comparator.columnar
                      else self._row_columns(comparator, taken, leaves))
            if values is None:
                return None
            columns.update(values)
        errs = self.mode.discrepancy_columns(target, bench)
        if errs is None:
            return None
        return columns, list(errs)

    def _row_columns(self, comparator: Any, taken: Sequence[Plain],
                     leaves: Sequence[list[tuple[TensorMeta, TensorMeta]]]) -> dict[str, list[Any]] | None:
        """A comparator without ``compare_columns``: its ``compare`` called on each row of the plain entries,
        as the row path calls it (the other comparators keep their column form). ``None`` when it raised a
        :class:`ProbeError` (the row path then says so with the row's name)."""
        mode_name, run = self.mode.name, comparator.run
        try:
            found = [run(LeafPair(plain.name, npu, bench, mode_name))
                     for plain, pairs in zip(taken, leaves) for npu, bench in pairs]
        except ProbeError:
            return None
        return {column: [values.get(column) if values else None for values in found] for column in comparator.columns}

    def _judged(self, taken: Sequence[Plain], leaves: Sequence[list[tuple[TensorMeta, TensorMeta]]],
                chunk: Chunk) -> Iterator[int]:
        """Comparators' ``judge`` on the rows of the plain entries: the start of each entry where one raises a
        row; it takes the row path (which flags the row and says why), the others stay plain."""
        columns = {name: chunk.columns[name] for name in chunk.names}
        judges = [comparator.run_judge for comparator in self.judges]
        new_view, row_result = _ColumnRow.__new__, RowResult
        for plain, pairs in zip(taken, leaves):
            at = plain.start
            for npu, bench in pairs:
                view = new_view(_ColumnRow)  # __init__'s two slots set here: a call less on every row
                view._columns, view._at = columns, at
                row = row_result(npu, bench, view)  # type: ignore[arg-type]
                at += 1
                if _raised(judges, row):
                    yield plain.start
                    break


def _raised(judges: Sequence[Any], row: RowResult) -> bool:
    """Whether one of the comparators' ``run_judge`` raises ``row`` (asked in order, up to the first that does)."""
    for judge in judges:
        if judge(row) is not None:
            return True
    return False
