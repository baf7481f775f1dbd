"""Match the entries of a target dump with those of a bench dump.

* exact (default): the same name, except that backward entries are
  renumbered by their order among the backward calls of the same API/module,
  so an extra forward (activation recomputation) does not shift them;
* fuzzy: call counts are ignored; the n-th call of an API under a parent
  matches the n-th call of that API under the same parent;
* with a :class:`~probe_core.compare.mapping.NameMap` (``--mapping`` or the
  built-in cross-framework table), target names are renamed into the bench's
  naming first, and module class names are left out of the match (paths are
  unique and classes differ between frameworks: ``Dense`` vs ``Linear``).

Only names are used: matching never loads entry values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from probe_core.compare.mapping import NameMap
from probe_core.dump.names import parse_entry_name
from probe_core.dump.reader import EntryRef


@dataclass(frozen=True, slots=True)
class Match:
    """A target entry and its bench entry; one side is ``None`` for an unmatched entry."""

    target: EntryRef | None
    bench: EntryRef | None


class _Keyer:
    """Computes match keys for the entries of one side."""

    def __init__(self, refs: Sequence[EntryRef], parents: dict, name_map: NameMap | None, drop_class: bool) -> None:
        self.refs, self.parents, self.map, self.drop_class = refs, parents, name_map, drop_class
        self.class_of = {}
        for ref in refs:
            parsed = parse_entry_name(ref.name)
            if parsed.kind == "module":
                self.class_of.setdefault(parsed.module_path, parsed.module_class)

    def base(self, name: str) -> tuple[str, str, str, int]:
        """(kind, renamed base, direction, count) of one name."""
        parsed = parse_entry_name(name)
        base = parsed.base
        if parsed.kind in ("module", "parameters_grad"):
            prefix, path, cls = parsed.prefix, parsed.module_path, parsed.module_class
            if self.map is not None:
                prefix = self.map.module_prefix(prefix)
                path = self.map.module_path(path, self.class_of)
                cls = self.map.module_class(cls)
            base = f"{prefix}.{path}.{'*' if self.drop_class else cls}"
        elif parsed.kind == "api" and self.map is not None:
            base = self.map.api_base(base)
        return parsed.kind, base, parsed.direction, parsed.count

    def exact_keys(self) -> list[tuple]:
        seen: dict[tuple, int] = defaultdict(int)
        keys = []
        for ref in self.refs:
            kind, base, direction, count = self.base(ref.name)
            if direction == "backward":
                count = seen[(kind, base)]
                seen[(kind, base)] += 1
            keys.append((kind, base, direction, count))
        return keys

    def fuzzy_keys(self) -> list[tuple]:
        seen: dict[tuple, int] = defaultdict(int)
        keys = []
        for ref in self.refs:
            kind, base, direction, _ = self.base(ref.name)
            parent = self.parents.get(ref.name)
            parent_key = self.base(parent)[:3] + (parse_entry_name(parent).count,) if parent else None
            group = (parent_key, kind, base, direction)
            keys.append(group + (seen[group],))
            seen[group] += 1
        return keys


def match_entries(target: Sequence[EntryRef], bench: Sequence[EntryRef], *, target_parents: dict | None = None,
                  bench_parents: dict | None = None, fuzzy: bool = False,
                  name_map: NameMap | None = None) -> list[Match]:
    """Pair target and bench entries; target order first, then bench-only entries in bench order."""
    active = name_map is not None and name_map.active
    target_keyer = _Keyer(target, target_parents or {}, name_map if active else None, active)
    bench_keyer = _Keyer(bench, bench_parents or {}, None, active)
    if fuzzy:
        target_keys, bench_keys = target_keyer.fuzzy_keys(), bench_keyer.fuzzy_keys()
    else:
        target_keys, bench_keys = target_keyer.exact_keys(), bench_keyer.exact_keys()
    by_key = {}
    for ref, key in zip(bench, bench_keys):
        by_key.setdefault(key, ref)
    matches, used = [], set()
    for ref, key in zip(target, target_keys):
        other = by_key.get(key)
        if other is not None and other.index not in used:
            used.add(other.index)
            matches.append(Match(ref, other))
        else:
            matches.append(Match(ref, None))
    matches.extend(Match(None, ref) for ref in bench if ref.index not in used)
    return matches
