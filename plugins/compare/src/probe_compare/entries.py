"""One matched entry compared on the row path: its rows, each comparator's values, the rules' verdicts and the
judge's facts.

:func:`compare_entry` is the per-entry stage of the compare pipeline that ``probe compare`` and ``probe graph``
both run (the columnar path, :mod:`probe_compare.columnar`, takes the plain entries of a chunk at once and
gives the same rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from probe_compare.comparator import LeafPair, LoadedComparator
from probe_compare.judge import EntryFacts, entry_facts
from probe_compare.mapping import NameMap
from probe_compare.rules import ERROR, RowResult, UNMATCHED, judge_entry, judge_unmatched
from probe_core.api import DataMode, DumpEntry, DumpError, ProbeError, TensorMeta


@dataclass
class EntryOutcome:
    """The compared rows of one entry (or of one unmatched entry)."""

    name: str
    index: int
    result: str
    rows: list[RowResult]
    npu_entry: DumpEntry | None = None  # the row path's (a plain entry's rows need none)
    bench_entry: DumpEntry | None = None
    facts: EntryFacts | None = None
    rendered: list[list[Any]] = field(default_factory=list)
    results: tuple[str, ...] = ()  # each rendered row's result
    text: str | None = None  # the rendered rows as CSV text (when the CSV alone is written), ``rendered`` then empty


def _pair_leaves(npu: DumpEntry | None, bench: DumpEntry | None,
                 name_map: NameMap | None = None) -> list[tuple[TensorMeta | None, TensorMeta | None]]:
    npu_leaves = npu.leaves() if npu else []
    bench_leaves = bench.leaves() if bench else []
    if npu is None or bench is None:
        return [(leaf, None) for leaf in npu_leaves] + [(None, leaf) for leaf in bench_leaves]
    cut_n, cut_b = len(npu.name), len(bench.name)
    by_suffix = {leaf.name[cut_b:]: leaf for leaf in bench_leaves}
    pairs, used = [], set()
    for leaf in npu_leaves:
        suffix = leaf.name[cut_n:]
        if name_map is not None:  # parameter names (gamma -> weight), -am argument maps, -dm tensor names
            suffix = name_map.tensor_suffix(npu.name, bench.name, suffix)
        other = by_suffix.get(suffix) if suffix is not None and suffix not in used else None
        if other is not None:
            used.add(suffix)
        pairs.append((leaf, other))
    pairs.extend((None, leaf) for leaf in bench_leaves if leaf.name[cut_b:] not in used)
    return pairs


def compare_entry(npu: DumpEntry | None, bench: DumpEntry | None, mode: DataMode,
                  comparators: Sequence[LoadedComparator], lenient: bool = False,
                  name_map: NameMap | None = None, postprocess: Any = None, rules: str = "noise") -> EntryOutcome:
    """Compare one matched entry (either side ``None`` for an unmatched one): metrics, the rules' verdicts
    and the facts the step's judge needs (:mod:`probe_compare.judge`).

    ``probe compare`` and ``probe graph`` both call it. ``name_map`` pairs tensors whose names differ
    (MindSpore ``gamma`` with PyTorch ``weight``, -am/-dm maps); ``postprocess`` is ``--config``'s tensor
    post-processing; ``rules`` is ``--rules``.
    """
    name = (npu or bench).name  # type: ignore[union-attr]
    index = npu.index if npu is not None else bench.index  # type: ignore[union-attr]
    rows = [RowResult(a, b) for a, b in _pair_leaves(npu, bench, name_map)]
    _check_leaves(rows, npu, bench, lenient)
    if npu is None or bench is None:
        side = "target" if bench is None else "bench"
        judge_unmatched(rows, side, mode, rules)
        present = npu or bench
        key = index if npu is not None else -1 - index  # bench-only entries: their own key space
        facts = entry_facts(name, key, present.parent, UNMATCHED, rows, mode, side)  # type: ignore[union-attr]
        return EntryOutcome(name, index, UNMATCHED, rows, npu, bench, facts)
    for row in rows:
        if row.npu is None or row.bench is None:
            continue
        pair = LeafPair(name, row.npu, row.bench, mode.name, npu.tensor_path(row.npu), bench.tensor_path(row.bench),
                        postprocess=postprocess)
        for comp in comparators:
            try:
                values = comp.run(pair)
            except ProbeError as exc:
                if not lenient:
                    raise
                row.flag(ERROR, exc.messages[0])
                continue
            row.metrics.update(values or {})
    result = judge_entry(name, rows, mode, comparators, rules)
    judged = [RowResult(row.npu, None) if row.part else row for row in rows]  # the judge skips a part of a DTensor
    facts = entry_facts(name, index, npu.parent, result, judged, mode, bench_name=bench.name)
    return EntryOutcome(name, index, result, rows, npu, bench, facts)


def _check_leaves(rows: list[RowResult], npu: DumpEntry | None, bench: DumpEntry | None, lenient: bool) -> None:
    """A leaf whose record is malformed (a statistic that is no number, a bad data_name) stops the compare
    with the file and key, or with ``lenient`` makes its row an error."""
    for row in rows:
        for leaf, entry in ((row.npu, npu), (row.bench, bench)):
            if leaf is None or leaf.problem is None:
                continue
            where = entry.dump.dump_file if entry is not None and entry.dump is not None else "dump.json"
            message = f"{where}: {leaf.name}: {leaf.problem}"
            if not lenient:
                raise DumpError(f"{message}; the dump is damaged or was edited: re-run the dump, or pass --lenient "
                                "to mark such rows as errors and go on")
            row.flag(ERROR, f"{message}.")
