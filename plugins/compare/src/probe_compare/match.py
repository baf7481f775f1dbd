"""Match the entries of a target dump with those of a bench dump.

* by place in the call tree (``tree``, the default of the noise judge; ``--fuzzy``): call counts are
  ignored; the n-th call of an API (or module) under a parent call matches the n-th call of that API
  under the matched parent call, the parents themselves matched the same way up to the root. A call
  made once more or less on one side shifts only its later siblings of the same name, never calls
  elsewhere (an extra ``Tensor.add`` in one layer leaves every other layer's pairs alone);
* by name (``--rules msprobe``, msprobe's matching): the same name, except that backward entries are
  renumbered by their order among the backward calls of the same API/module, so an extra forward
  (activation recomputation) does not shift them;
* with a :class:`~probe_compare.mapping.NameMap` (``--mapping`` or the
  built-in cross-framework table), target names are renamed into the bench's
  naming first, and module class names are left out of the match (paths are
  unique and classes differ between frameworks: ``Dense`` vs ``Linear``).

Only names are used: matching never loads entry values. Two dumps of the same code usually hold the same names
in the same order under the same construct.json: every rule above then pairs each entry with the bench's entry at
its place, so :class:`Matcher` pairs them so, and makes its keys only from the first name that differs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from probe_compare.mapping import NameMap
from probe_core.api import DIRECTIONS, EntryRef, common_api_name, parse_entry_name


@dataclass(frozen=True, slots=True)
class Match:
    """A target entry and its bench entry; one side is ``None`` for an unmatched entry."""

    target: EntryRef | None
    bench: EntryRef | None


class _Keyer:
    """Computes match keys for the entries of one side, one name at a time in execution order."""

    def __init__(self, names: Iterable[str], parents: dict, name_map: NameMap | None, drop_class: bool,
                 tree: bool) -> None:
        self.parents, self.map, self.drop_class = parents, name_map, drop_class
        self.class_of: dict[str, str] = {}
        if name_map is not None:  # module classes by path, for the class-keyed layer map
            for name in names:
                parsed = parse_entry_name(name)
                if parsed.kind == "module":
                    self.class_of.setdefault(parsed.module_path, parsed.module_class)
        self.seen: dict[tuple, int] = defaultdict(int)
        self.keys: dict[str, tuple] = {}  # the tree keys of parents (made when their first child came)
        self.parent_names = set(parents.values()) if tree else set()

    def base(self, name: str) -> tuple[str, str, str, int]:
        """(kind, renamed base, direction, count) of one name."""
        common = common_api_name(name) if self.map is None else None
        if common is not None:
            return ("api", *common)
        parsed = parse_entry_name(name)
        base = parsed.base
        if parsed.kind in ("module", "parameters_grad"):
            prefix, path, cls = parsed.prefix, parsed.module_path, parsed.module_class
            if self.map is not None:
                path, cls = self.map.cell_name(path, cls)
                prefix = self.map.module_prefix(prefix)
                path = self.map.module_path(path, self.class_of)
                cls = self.map.module_class(cls)
            base = f"{prefix}.{path}.{'*' if self.drop_class else cls}"
        elif parsed.kind == "api" and self.map is not None:
            base = self.map.api_base(base)
        return parsed.kind, base, parsed.direction, parsed.count

    def key(self, name: str) -> tuple:
        """The name key of the next entry (call in execution order: counts are kept per side)."""
        kind, base, direction, count = self.base(name)
        if direction == "backward":
            count = self.seen[(kind, base)]
            self.seen[(kind, base)] += 1
        return (kind, base, direction, count)

    def tree_key(self, name: str, depth: int = 0) -> tuple:
        """(parent's tree key, kind, base, direction, ordinal among the calls of that base under that parent).

        A module entry is written when its call ends, after its children: its key is made when its first
        child asks for it (its earlier siblings have all ended by then, so its ordinal is its place among
        them) and given again when the entry itself comes."""
        known = self.keys.get(name)
        if known is not None:
            return known
        parent = self.parents.get(name)
        parent_key = self.tree_key(parent, depth + 1) if parent and depth < 256 else None
        parts = name.rsplit(".", 2) if self.map is None else ()
        if len(parts) == 3 and parts[2] in DIRECTIONS and parts[1].isdigit():  # common_api_name's test, inline
            group: tuple = (parent_key, "api", parts[0], parts[2])
        else:
            kind, base, direction, _ = self.base(name)
            group = (parent_key, kind, base, direction)
        seen = self.seen
        ordinal = seen[group]
        seen[group] = ordinal + 1
        key = group + (ordinal,)
        if name in self.parent_names:
            self.keys[name] = key
        return key


class Matcher:
    """Matches target entries, fed one by one in execution order, against an indexed bench dump.

    By place in the call tree (``tree``): forward entries by their tree keys (:meth:`_Keyer.tree_key`); an
    API's backward pairs with the backward of the bench call its forward paired with (the recorders of two
    runs may give a backward call another parent, its forward never); module backward entries and parameter
    gradients by name. ``target_names`` is needed only with a layer map (module classes by path);
    construct.json's keys are enough.
    """

    def __init__(self, bench: Sequence[EntryRef], *, bench_parents: dict | None = None,
                 target_parents: dict | None = None, target_names: Iterable[str] = (), fuzzy: bool = False,
                 name_map: NameMap | None = None) -> None:
        active = name_map is not None and name_map.active
        self.bench = bench
        self._made = (bench_parents or {}, target_parents or {}, list(target_names), fuzzy,
                      name_map if active else None)
        self.used: set[int] = set()
        # the common case: the target's names come as the bench's, one by one, under the same call tree (or by
        # name, where the tree is not read); every key then pairs an entry with the bench's entry at its place,
        # and no key is made until a name differs (or comes twice, which keys pair otherwise)
        self._fed: list[str] | None = [] if not active and (not fuzzy or self._made[0] == self._made[1]) else None
        self._seen: set[str] = set()
        if self._fed is None:
            self._keys()

    def _keys(self) -> None:
        """Make both sides' keyers and index the bench by key."""
        bench_parents, target_parents, target_names, fuzzy, name_map = self._made
        drop_class = name_map is not None
        self.target_keyer = _Keyer(target_names, target_parents, name_map, drop_class, False)
        self.target_tree = _Keyer(target_names, target_parents, name_map, drop_class, True) if fuzzy else None
        bench_keyer = _Keyer((), bench_parents, None, drop_class, False)
        bench_tree = _Keyer((), bench_parents, None, drop_class, True) if fuzzy else None
        self.by_key: dict[tuple, EntryRef] = {}
        self.by_tree: dict[tuple, EntryRef] = {}
        for ref in self.bench:  # by tree: forward entries by their tree keys, the others by name keys
            if bench_tree is not None and _by_tree(ref.name):
                self.by_tree.setdefault(bench_tree.tree_key(ref.name), ref)
            else:
                self.by_key.setdefault(bench_keyer.key(ref.name), ref)
        self.entries = name_map.entries if name_map is not None else {}  # -dm: named pairs win over keys
        self.by_name = {ref.name: ref for ref in self.bench} if self.entries or fuzzy else {}
        self.forward_of: dict[str, str] = {}  # target API forward -> the bench forward it paired with

    def match(self, name: str) -> EntryRef | None:
        """The bench entry for the next target entry ``name``, or ``None``."""
        fed = self._fed
        if fed is not None:
            at = len(fed)
            if at < len(self.bench) and self.bench[at].name == name and name not in self._seen:
                fed.append(name)
                self._seen.add(name)
                ref = self.bench[at]
                self.used.add(ref.index)
                return ref
            self._by_keys_from_here()
        tree = self.target_tree is not None and _by_tree(name)
        key = self.target_tree.tree_key(name) if tree else self.target_keyer.key(name)  # (each side's counters
        if name in self.entries:                                                       # follow its entries)
            other = self.by_name.get(self.entries[name])
        elif tree:
            other = self.by_tree.get(key)
            if other is not None and name.endswith(".forward"):
                self.forward_of[name] = other.name
        elif self.target_tree is None:
            other = self.by_key.get(key)
        else:
            paired = self.forward_of.get(name[:-len("backward")] + "forward") if name.endswith(".backward") else None
            other = self.by_name.get(paired[:-len("forward")] + "backward") if paired else self.by_key.get(key)
        if other is None or other.index in self.used:
            return None
        self.used.add(other.index)
        return other

    def _by_keys_from_here(self) -> None:
        """Leave the pairing by place: make the keys, and feed the names paired so far through them (they pair
        with the same bench entries, and leave each side's counters as the names after them need)."""
        fed, self._fed = self._fed or [], None
        self._keys()
        self.used = set()
        for name in fed:
            self.match(name)

    def unmatched_bench(self) -> list[EntryRef]:
        """Bench entries no target entry took, in bench order."""
        return [ref for ref in self.bench if ref.index not in self.used]


def _by_tree(name: str) -> bool:
    """Whether an entry is matched by its place in the call tree: a forward call (an API's, ``X.0.forward``, or
    a module's, ``Module.m.Linear.forward.0``), not a backward or a parameter gradient."""
    return ".forward" in name and ".backward" not in name and ".parameters_grad" not in name


def match_entries(target: Sequence[EntryRef], bench: Sequence[EntryRef], *, target_parents: dict | None = None,
                  bench_parents: dict | None = None, fuzzy: bool = False,
                  name_map: NameMap | None = None) -> list[Match]:
    """Pair target and bench entries; target order first, then bench-only entries in bench order."""
    matcher = Matcher(bench, bench_parents=bench_parents, target_parents=target_parents,
                      target_names=[ref.name for ref in target], fuzzy=fuzzy, name_map=name_map)
    matches = [Match(ref, matcher.match(ref.name)) for ref in target]
    matches.extend(Match(None, ref) for ref in matcher.unmatched_bench())
    return matches
