"""Read probe's and msprobe's dumps: one :class:`RankDump` per ``dump.json``.

A rank dump is read lazily: :meth:`RankDump.entries` streams entries in
execution order (file order), :meth:`RankDump.index` makes one pass that
keeps only names and byte spans, and :meth:`RankDump.load` comes back for
one entry. construct.json (parents) and stack.json (call stacks) are loaded
on first use. Malformed files raise :class:`~probe_core.errors.DumpError`
naming the file, line, column and byte; with ``lenient=True`` the entries
before the fault are returned and a :class:`~probe_core.plugins.ProbeWarning`
says what was dropped.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from probe_core.dump.journal import JOURNAL_NAME, StepRecords, read_journal
from probe_core.dump.jsonstream import JsonStreamError, Member, iter_object, loads, read_span
from probe_core.fastjson import MISS, try_decode
from probe_core.dump.leaves import TensorMeta, _short, leaves_of
from probe_core.dump.names import EntryName, parse_entry_name
from probe_core.errors import DumpError

TENSOR_DIR = "dump_tensor_data"


@dataclass(frozen=True, slots=True)
class EntryRef:
    """Where one entry lives in dump.json: ``index`` in execution order, byte span ``[start, end)``."""

    name: str
    index: int
    start: int
    end: int


@dataclass(frozen=True)
class DumpEntry:
    """One entry of a dump (an API call, a module call, parameter gradients, a saved variable).

    ``index`` is its position in execution order (file order), ``data`` its
    raw dump.json value, ``parent`` its parent node from construct.json
    (``None`` at the top or at L1), ``stack`` its call stack lines.

    An entry streamed with ``known`` (:meth:`RankDump.entries`) may come *flat*: ``data`` is then ``None``,
    ``flat`` holds what the scanner read instead (``(known[skeleton], statistics)``, see
    :func:`probe_core.dump.jsonstream.iter_object`) and :meth:`RankDump.loaded` reads ``data`` back by
    ``span``.
    """

    name: str
    index: int
    data: Any
    parent: str | None = None
    stack: tuple[str, ...] = ()
    dump: RankDump | None = field(default=None, repr=False, compare=False)
    flat: tuple[Any, tuple] | None = field(default=None, repr=False, compare=False)
    span: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def streamed(cls, name: str, index: int, data: Any, parent: str | None, stack: tuple[str, ...],
                 dump: RankDump | None, flat: tuple[Any, tuple] | None, span: tuple[int, int] | None) -> DumpEntry:
        """The entry with every field given, made at half the cost of ``__init__`` (a frozen dataclass sets
        each field through ``object.__setattr__``): for readers that make one per entry of a dump."""
        entry = object.__new__(cls)
        object.__setattr__(entry, "__dict__", {"name": name, "index": index, "data": data, "parent": parent,
                                               "stack": stack, "dump": dump, "flat": flat, "span": span})
        return entry

    @property
    def parsed(self) -> EntryName:
        """Name parts: kind, base (API or module), direction, count."""
        return parse_entry_name(self.name)

    def leaves(self) -> list[TensorMeta]:
        """Tensors and scalars of this entry, one per compare row, in msprobe's row order."""
        try:
            return leaves_of(self.name, self.data)
        except ValueError as exc:
            where = self.dump.dump_file if self.dump else "dump.json"
            raise DumpError(f"{where}: entry {self.name!r}: {exc}") from None

    def tensor_path(self, leaf: TensorMeta) -> Path | None:
        """The file holding ``leaf``'s tensor (tensor mode), or ``None`` when it has none."""
        if not leaf.data_name or self.dump is None:
            return None
        return self.dump.tensor_file(leaf.data_name)


class RankDump:
    """The dump of one rank at one step: ``dump.json`` plus its neighbours.

    ``folder`` holds ``dump.json``, ``stack.json``, ``construct.json`` and
    ``dump_tensor_data/``; ``step`` and ``rank`` come from the folder names
    (``step{N}``, ``rank{N}``/``rank``/``proc{pid}``), ``None`` when absent.
    Use as a context manager (or call :meth:`close`) when using :meth:`load`.
    """

    def __init__(self, dump_file: str | Path, step: int | None = None, rank: int | None = None,
                 lenient: bool = False) -> None:
        self.dump_file = Path(dump_file)
        self.folder = self.dump_file.parent
        self.step, self.rank, self.lenient = step, rank, lenient
        self._handle = None
        self._has_entries = True
        self._mode: tuple[Any, Any] | None = None
        #: with ``lenient``: why reading dump.json stopped early ("" when it did not)
        self.problem = ""
        self._warned: set[str] = set()  # each warning once per dump, however often it is read
        #: no dump.json, only the record journal of a step whose process died: read from the journal
        self.journal_only = not self.dump_file.is_file() and (self.folder / JOURNAL_NAME).is_file()

    def __repr__(self) -> str:
        return f"RankDump({str(self.dump_file)!r}, step={self.step}, rank={self.rank})"

    def __enter__(self) -> RankDump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    # -- header and mode ------------------------------------------------------

    @cached_property
    def header(self) -> dict[str, Any]:
        """Top-level fields other than ``data``: task, level, framework, dump_data_dir (and ``partial``,
        ``interrupted`` of a step an interrupted run wrote)."""
        header = self._journal_header() if self.journal_only else self._file_header()
        if not self.journal_only and (self.folder / JOURNAL_NAME).is_file():
            warnings.warn(f"{self.folder}: a record journal lies beside dump.json: the run was killed while it "
                          f"finished this step, so stack.json/construct.json may be missing; `probe recover "
                          f"{self.folder}` tidies it", _probe_warning(), stacklevel=3)
        if header.get("partial") is True and not self.journal_only:
            how = "recovered from its journal by probe recover" if header.get("recovered") else \
                f"interrupted by {header.get('interrupted') or 'a signal'}"
            warnings.warn(f"{self.dump_file}: this step is partial ({how}): entries after its last record are "
                          "missing, so they show as unmatched on the other side", _probe_warning(), stacklevel=3)
        return header

    def _journal_header(self) -> dict[str, Any]:
        records = self._journal
        header = dict(records.header or {})
        header.update(partial=True, journal_only=True)
        self._has_entries = bool(records.entries)
        root = self.folder.parent.parent if self.folder.parent.name.startswith("step") else self.folder
        damaged = f"; reading stopped at a damaged record ({records.problem})" if records.problem else ""
        warnings.warn(f"{self.folder}: no dump.json, only the record journal {JOURNAL_NAME} of a step that did not "
                      f"finish (the process was killed); reading its {len(records.entries)} entries{damaged}. "
                      f"`probe recover {root}` writes its dump.json", _probe_warning(), stacklevel=4)
        return header

    @cached_property
    def _journal(self) -> StepRecords:
        try:
            return read_journal(self.folder / JOURNAL_NAME)
        except OSError as exc:
            raise DumpError(f"{self.folder / JOURNAL_NAME}: cannot read the record journal ({exc.strerror})") from None

    def _file_header(self) -> dict[str, Any]:
        if not self.dump_file.is_file():
            raise DumpError(f"{self.dump_file}: no such file; point probe at a dump.json or its folder")
        header: dict[str, Any] = {}
        stream = iter_object(self.dump_file, "data", header)
        first = None
        try:
            first = next(stream, None)
            self._has_entries = first is not None
            if first is None:
                self._check_has_data(header)
            elif not {"task", "framework"} <= header.keys():
                for _ in stream:  # fields after "data": read on to the end
                    pass
        except JsonStreamError as exc:
            if not self.lenient:
                raise self._error(exc) from None
            self.problem = str(exc)
            self._has_entries = first is not None
        finally:
            stream.close()
        return header

    def _check_has_data(self, header: dict[str, Any]) -> None:
        if "data" in header and not isinstance(header["data"], dict):
            raise DumpError(f'{self.dump_file}: "data" must be an object of entries, '
                            f"got {type(header['data']).__name__}; is this a dump.json?")

    @property
    def has_entries(self) -> bool:
        """False when ``data`` is empty (cheap: reads up to the first entry)."""
        self.header  # noqa: B018 (reads up to the first entry)
        return self._has_entries

    @property
    def framework(self) -> str:
        """``pytorch``, ``mindspore`` or ``""`` when the dump does not say."""
        return str(self.header.get("framework") or "")

    @property
    def task(self) -> str:
        return str(self.header.get("task") or "")

    @property
    def level(self) -> str:
        return str(self.header.get("level") or "")

    def first_tensor_record(self) -> dict[str, Any] | None:
        """The dump.json object of the first tensor in execution order (``None`` when there is none).

        Data modes recognise a dump by it (:func:`probe_core.modes.mode_of_dump`).
        """
        for entry in self.entries():
            for leaf in entry.leaves():
                if leaf.is_tensor:
                    return dict(leaf.raw or {})
        return None

    def mode(self, registry: Any) -> Any:
        """The installed :class:`~probe_core.modes.DataMode` that reads this dump."""
        from probe_core.modes import mode_of_dump

        if self._mode is None or self._mode[0] is not registry:
            self._mode = (registry, mode_of_dump(self.task, self.first_tensor_record(), registry,
                                                 str(self.dump_file)))
        return self._mode[1]

    # -- entries --------------------------------------------------------------

    def _members(self, lenient: bool | None, known: dict[bytes, Any] | None = None) -> Iterator[Member]:
        lenient = self.lenient if lenient is None else lenient
        if self.journal_only:
            self.header  # noqa: B018 (warns once)
            for i, (name, text) in enumerate(self._journal.entries):
                yield Member(name, json.loads(text), i, i)
            return
        if not self.dump_file.is_file():
            raise DumpError(f"{self.dump_file}: no such file; point probe at a dump.json or its folder")
        header: dict[str, Any] = {}
        count = 0
        try:
            for member in iter_object(self.dump_file, "data", header, known):
                count += 1
                yield member
            self._check_has_data(header)
        except JsonStreamError as exc:
            if not lenient:
                raise self._error(exc) from None
            self.problem = str(exc)
            self._warn_once(f"{self.dump_file}: {exc}; read the {count} entries before it and dropped the rest "
                            "(--lenient)")

    def _warn_once(self, message: str) -> None:
        """Warn of ``message`` the first time this dump meets it (a compare reads a dump several times)."""
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, _probe_warning(), stacklevel=4)

    def _error(self, exc: JsonStreamError) -> DumpError:
        if exc.offset == 0 and exc.truncated:
            return DumpError(f"{self.dump_file}: the file is empty (0 bytes); the dump wrote nothing: "
                             f"check that collection ran and reached a step end, then dump again")
        if exc.truncated:
            fix = ("the file is truncated (did the run stop while dumping?); re-run the dump, "
                   "or pass --lenient to use the entries before that point")
        else:
            fix = "the file is not valid JSON; re-run the dump, or pass --lenient to use the entries before that point"
        return DumpError(f"{self.dump_file}: {exc}: {fix}")

    def entries(self, lenient: bool | None = None, known: dict[bytes, Any] | None = None) -> Iterator[DumpEntry]:
        """Every entry in execution order, streamed (memory: one entry at a time). With ``known``, the
        entries the scanner knows come flat (see :class:`DumpEntry`)."""
        parents, stacks = self.construct, self.stacks
        if known is None:
            for index, member in enumerate(self._members(lenient)):
                yield DumpEntry(member.key, index, member.value, parents.get(member.key),
                                stacks.get(member.key, ()), self)
            return
        streamed = DumpEntry.streamed
        for index, member in enumerate(self._members(lenient, known)):
            yield streamed(member.key, index, member.value, parents.get(member.key), stacks.get(member.key, ()), self,
                           member.flat, (member.start, member.end))

    def loaded(self, entry: DumpEntry) -> DumpEntry:
        """``entry`` with its ``data``: a flat entry's read back by its span (others as they are)."""
        if entry.data is not None or entry.span is None:
            return entry
        return self.load(EntryRef(entry.name, entry.index, *entry.span))

    def values(self, lenient: bool | None = None) -> dict[str, Any]:
        """Every entry's raw dump.json value by name, in execution order (the whole dump in memory; what
        :meth:`entries` gives, without an entry record per entry). A whole file msgspec reads exactly is
        decoded in one call (a third of the cost of the stream); any other is streamed, with its errors."""
        if not self.journal_only:
            try:
                top = try_decode(self.dump_file.read_bytes())
            except OSError:
                top = MISS
            if top.__class__ is dict and top.get("data").__class__ is dict:
                return top["data"]
        return {member.key: member.value for member in self._members(lenient)}

    def index(self, lenient: bool | None = None) -> list[EntryRef]:
        """Names and byte spans of every entry, in execution order (one pass, values dropped)."""
        return [EntryRef(m.key, i, m.start, m.end) for i, m in enumerate(self._members(lenient))]

    def index_with(self, keep: Callable[[str, Any, Any], Any], lenient: bool | None = None,
                   known: dict[bytes, Any] | None = None) -> tuple[list[EntryRef], list[Any]]:
        """:meth:`index`, and ``keep(name, value, flat)`` of each entry from the same pass (what a reader wants
        to hold of an entry without decoding it again, e.g. the columnar compare's compact form). ``flat`` is
        ``None`` but for the entries read flat with ``known`` (then ``value`` may be ``None``, see
        :class:`DumpEntry`)."""
        refs, kept = [], []
        for i, m in enumerate(self._members(lenient, known)):
            refs.append(EntryRef(m.key, i, m.start, m.end))
            kept.append(keep(m.key, m.value, m.flat))
        return refs, kept

    def load(self, ref: EntryRef) -> DumpEntry:
        """Read one entry back from its :class:`EntryRef` (random access; keeps the file open)."""
        if self.journal_only:
            name, text = self._journal.entries[ref.start]
            return DumpEntry(name, ref.index, json.loads(text), self.construct.get(name),
                             self.stacks.get(name, ()), self)
        if self._handle is None:
            self._handle = open(self.dump_file, "rb")  # noqa: SIM115 (closed by close())
        try:
            data = read_span(self._handle, ref.start, ref.end)
        except (ValueError, OSError) as exc:
            raise DumpError(f"{self.dump_file}: entry {ref.name!r} at byte {ref.start} cannot be read "
                            f"again ({exc}); was the file changed during the compare?") from None
        return DumpEntry(ref.name, ref.index, data, self.construct.get(ref.name),
                         self.stacks.get(ref.name, ()), self)

    # -- neighbours -----------------------------------------------------------

    @cached_property
    def construct(self) -> dict[str, str | None]:
        """``{node: parent or None}`` from construct.json (``{}`` when absent or empty)."""
        if self.journal_only:
            return dict(self._journal.construct)
        path = self.folder / "construct.json"
        data = _read_small_json(path, self.lenient)
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise DumpError(f"{path}: expected an object {{node: parent}}, got {type(data).__name__}; "
                            "regenerate the dump (construct.json is written with dump.json)")
        bad = next(((node, parent) for node, parent in data.items()
                    if parent is not None and not isinstance(parent, str)), None)
        if bad is not None:
            message = (f"{path}: key {bad[0]!r}: the parent is {_short(bad[1])}, not a node name or null")
            if not self.lenient:
                raise DumpError(f"{message}; regenerate the dump, or pass --lenient to treat such parents as null")
            warnings.warn(f"{message}; treated as null (--lenient)", _probe_warning(), stacklevel=3)
            data = {node: parent if parent is None or isinstance(parent, str) else None
                    for node, parent in data.items()}
        return data

    @cached_property
    def stacks(self) -> dict[str, tuple[str, ...]]:
        """``{entry name: stack lines}`` from stack.json (both msprobe layouts; ``{}`` when absent)."""
        if self.journal_only:
            records = self._journal
            return {name: tuple(records.stack_lines.get(sid, ()))
                    for sid, names in records.stack_names.items() for name in names}
        path = self.folder / "stack.json"
        data = _read_small_json(path, self.lenient)
        if not isinstance(data, dict):
            return {}
        stacks: dict[str, tuple[str, ...]] = {}
        for key, value in data.items():
            if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                    and isinstance(value[1], list)):
                lines = tuple(str(line) for line in value[1])
                for name in value[0]:
                    stacks[str(name)] = lines
            elif isinstance(value, list):  # older layout: {entry: [lines]}
                stacks[key] = tuple(str(line) for line in value)
        return stacks

    @cached_property
    def tensor_dir(self) -> Path:
        """Where tensor files are: ``folder/dump_tensor_data`` (else the header's ``dump_data_dir``)."""
        local = self.folder / TENSOR_DIR
        declared = self.header.get("dump_data_dir")
        if not local.is_dir() and isinstance(declared, str) and declared and Path(declared).is_dir():
            return Path(declared)
        return local

    def tensor_file(self, data_name: str) -> Path:
        """The path of tensor file ``data_name`` (not checked for existence); a ``data_name`` that is not a
        plain file name (``../x``, ``/etc/passwd``) is a :class:`DumpError`: no dump reads outside its folder."""
        if not isinstance(data_name, str) or data_name in ("", ".", "..") or "/" in data_name or "\\" in data_name:
            raise DumpError(f"{self.dump_file}: data_name {data_name!r} is not a file name inside "
                            f"{self.tensor_dir.name}/; the dump is damaged or was edited: collect it again")
        return self.tensor_dir / data_name


def _probe_warning() -> type[Warning]:
    from probe_core.plugins import ProbeWarning

    return ProbeWarning


def _read_small_json(path: Path, lenient: bool) -> Any:
    """Load stack.json / construct.json; ``None`` when missing or empty."""
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DumpError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
    if not text.strip():
        return None
    try:
        return loads(text)
    except ValueError as exc:
        message = f"{path}: {exc}"
        if lenient:
            warnings.warn(f"{message}; ignoring this file (--lenient)", _probe_warning(), stacklevel=3)
            return None
        raise DumpError(f"{message}: re-run the dump, or pass --lenient to ignore this file") from None
