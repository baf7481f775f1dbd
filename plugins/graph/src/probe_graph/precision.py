"""Precision index and colours of compared nodes: the compare module's one judge, applied to graph nodes.

Each matched target node is compared as ``probe compare`` compares its entry
(:func:`probe_core.api.compare_entry`: the same comparators, the
same rules, the data mode and the comparator plugins; plain nodes a chunk at a
time on the columnar path, :class:`probe_core.api.ColumnarCompare`) and gets a precision
index from the verdict (pass 0, warning 0.5, error 1). The facts of every
node go to the same noise-aware judge as ``probe compare``'s
(:func:`probe_core.api.judge_job`, run over all graphs by
:mod:`probe_graph.service`), whose errors then turn nodes red: both
commands name the same first divergence. The viewer colours nodes by
``tb_config.node_colors``: pale for [0, 0.3), orange for [0.3, 0.6), red for
[0.6, 1], grey for unmatched nodes. The data mode says how each leaf's
metrics show beside its tensor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from probe_compare.api import (ColumnarCompare, EntryFacts, LoadedComparator, Plain, compare_entry, entry_facts,
                               plain_facts)
from probe_core.api import DataMode, DumpEntry, RankDump
from probe_graph.api import Graph, Node
from probe_graph.vis_db import MetricValues, NodeMetrics

PASS_INDEX, WARNING_INDEX, ERROR_INDEX = 0.0, 0.5, 1.0
WARNING_AT, ERROR_AT = 0.3, 0.6
INDEX_OF = {"pass": PASS_INDEX, "warning": WARNING_INDEX, "error": ERROR_INDEX}
GREY = "#C7C7C7"
NODES_CHUNK = 256  # nodes scored at once (a graph keeps both graphs in memory: the chunk stays small)


def node_colors(mode: DataMode) -> dict[str, Any]:
    """``tb_config.node_colors`` for a compare in ``mode`` (the seeds' legend)."""
    what = mode.legend
    return {
        "#FFFCF3": {"value": [0, WARNING_AT], "description": f"pass: {what} within tolerance"},
        "#FFDC7F": {"value": [WARNING_AT, ERROR_AT], "description": f"warning: {what} suspicious"},
        "#FF704D": {"value": [ERROR_AT, 1], "description": f"error: {what} out of tolerance"},
        GREY: {"value": [], "description": "unmatched node: no counterpart on the bench side"},
    }


def tool_tips(mode: DataMode, comparators: Sequence[LoadedComparator]) -> dict[str, str]:
    """What the viewer shows when hovering a metric name: the mode's, then each comparator's."""
    tips = dict(mode.tool_tips())
    for comp in comparators:
        tips.update(comp.tool_tips)
    return tips


def _entry(node: Node, dump: RankDump | None) -> DumpEntry:
    parent = node.parent.name if node.parent is not None else None
    return DumpEntry.streamed(node.name, node.order, node.entry if isinstance(node.entry, dict) else {}, parent, (),
                              dump, None, None)


def _dump(graph: Graph) -> RankDump | None:
    """The graph's rank dump, where tensor files are found (``None`` for a graph built in memory)."""
    return RankDump(Path(graph.dump_file)) if graph.dump_file else None


def score_graphs(target: Graph, bench: Graph, mode: DataMode | None, comparators: Sequence[LoadedComparator],
                 rules: str = "noise") -> tuple[dict[str, NodeMetrics], list[EntryFacts]]:
    """Set ``precision_index`` on matched nodes of both sides from the rules; return the target side's shown
    metrics (plain nodes' as :class:`MetricValues`, shown when their rows are made) and the judge's facts of
    the target's nodes in execution order, then those of the bench's unmatched nodes (:func:`_bench_only_facts`).

    ``mode`` ``None`` compares structure only (task ``structure``): every matched node passes.
    """
    metrics: dict[str, NodeMetrics] = {}
    facts: list[EntryFacts] = []
    target_dump, bench_dump = _dump(target), _dump(bench)
    columnar = ColumnarCompare(mode, comparators, rules) if mode is not None else None
    nodes = list(target.walk())  # in order (Graph.renumber numbers the walk): no sort
    try:
        for start in range(0, len(nodes), NODES_CHUNK):
            chunk = nodes[start:start + NODES_CHUNK]
            pairs = {node.name: (_entry(node, target_dump), _entry(node.matched, bench_dump)) for node in chunk
                     if node.matched is not None and _has_tensors(node)} if mode is not None else {}
            found = columnar.compare_entries(list(pairs.values())) if columnar else []
            plain = {name: one for name, one in zip(pairs, found) if one is not None}
            metrics.update(_metric_values(plain, mode))  # type: ignore[arg-type]
            for node in chunk:
                _score(node, mode, comparators, rules, pairs.get(node.name), plain.get(node.name), metrics, facts)
    finally:
        for dump in (target_dump, bench_dump):
            if dump is not None:
                dump.close()
    if mode is not None:
        facts.extend(_bench_only_facts(bench, mode))
    return metrics, facts


def _bench_only_facts(bench: Graph, mode: DataMode) -> Iterator[EntryFacts]:
    """The facts of the bench's nodes with no target partner, as ``probe compare`` gives its bench-only entries:
    side ``bench``, index ``-1 - k`` where ``k`` counts the bench's judged nodes (paired or not) before it in the
    bench's order, so the judge puts each where the bench made it."""
    judged = 0
    for node in bench.walk():  # in order
        other = node.matched
        if other is None and (node.inputs or node.outputs):
            parent = node.parent.name if node.parent is not None else None
            yield entry_facts(node.name, -1 - judged, parent, "unmatched", [], mode, "bench")
        elif other is None or not _has_tensors(other):
            continue
        judged += 1


def _has_tensors(node: Node) -> bool:
    other = node.matched
    return bool(node.inputs or node.outputs or other.inputs or other.outputs)  # type: ignore[union-attr]


def _score(node: Node, mode: DataMode | None, comparators: Sequence[LoadedComparator], rules: str,
           pair: tuple[DumpEntry, DumpEntry] | None, plain: Plain | None,
           metrics: dict[str, NodeMetrics], facts: list[EntryFacts]) -> None:
    """One target node: its precision index (and its partner's), its shown metrics and its facts."""
    other = node.matched
    if other is None:
        node.precision_index = None
        if mode is not None and (node.inputs or node.outputs):
            parent = node.parent.name if node.parent is not None else None
            facts.append(entry_facts(node.name, node.order, parent, "unmatched", [], mode, "target"))
        return
    verdict = "pass"
    if pair is not None:
        npu, bench = pair
        if plain is not None:  # compared on the columnar path: every row passes, with no message
            # the worst rows' texts stay Reasons, made only for the few the judge names: a Reason holds the
            # facts' own lazy pairs (no more than its text would weigh), and a worker's pickle makes the text
            facts.append(plain_facts(npu.index, npu.parent, plain, mode))  # type: ignore[arg-type]
        else:
            outcome = compare_entry(npu, bench, mode, comparators, lenient=True, rules=rules)  # type: ignore[arg-type]
            verdict = outcome.result
            if outcome.facts is not None:
                facts.append(outcome.facts)
            shown = _shown(outcome.rows, mode)  # type: ignore[arg-type]
            if shown:
                metrics[node.name] = shown
    node.precision_index = other.precision_index = INDEX_OF.get(verdict, PASS_INDEX)


def _metric_values(plains: dict[str, Plain], mode: DataMode) -> Iterator[tuple[str, NodeMetrics]]:
    """Each plain entry's shown metrics: where the mode has ``shown_columns``, as (shown names, {tensor key: row},
    shown columns), the columns made once per compare chunk (the writer formats each set once per chunk of rows:
    :data:`NODES_CHUNK` divides :data:`~probe_graph.vis_db.ROWS_CHUNK`, and both walk the nodes in order);
    else as :class:`~probe_graph.vis_db.MetricValues`, shown when its row is written."""
    made: dict[int, tuple[list[tuple], Any]] = {}  # by chunk: its rows, and its shown names and columns or None
    for name, plain in plains.items():
        chunk = plain.chunk
        names = chunk.names  # Plain.names and Plain.count read straight: two Python calls less per node
        if not names:
            continue
        found = made.get(id(chunk))
        if found is None:
            rows = list(zip(*(chunk.columns[column] for column in names)))
            shown = mode.shown_columns(names, rows)
            found = made[id(chunk)] = rows, shown and (shown[0], list(shown[1]))  # one list: formatted once
        rows, shown = found
        start, suffixes = plain.start, plain.rows.suffixes
        keys = map(plain.name.__add__, suffixes)
        if shown is not None:
            yield name, (shown[0], dict(zip(keys, range(start, start + len(suffixes)))), shown[1])
        else:
            yield name, MetricValues(names, list(keys), rows[start:start + len(suffixes)])


def _shown(rows: Sequence[Any], mode: DataMode) -> dict[str, dict[str, Any]]:
    """``{target tensor key: shown metrics}``, with the row's result where a rule said why."""
    shown: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.npu is None:
            continue
        if row.metrics:
            shown[row.npu.name] = mode.shown_metrics(row.metrics)
        if row.messages:
            shown.setdefault(row.npu.name, {})["Result"] = str(row.result)
    return shown
