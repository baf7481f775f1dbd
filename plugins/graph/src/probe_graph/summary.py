"""The one-page summary ``probe graph`` prints: nodes, matched, errors, warnings, first divergence."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from probe_core.api import abridged, gaps
from probe_graph.api import Graph
from probe_graph.precision import ERROR_AT, WARNING_AT


class GraphSummary(NamedTuple):  # not a frozen dataclass: made at import at a tenth of the cost
    """What one graph (or compared pair) amounts to; picklable."""

    step: int
    rank: int
    nodes: int
    bench_nodes: int | None = None
    matched: int = 0
    errors: int = 0
    warnings: int = 0
    overflows: int = 0
    first_divergent: str | None = None
    first_overflow: str | None = None
    job_first: str | None = None  # the first divergence of the whole job: "step S rank R: NAME"


def summarize(target: Graph, bench: Graph | None = None) -> GraphSummary:
    """Count a graph's (compared) nodes; the first divergent/overflowing node in execution order."""
    errors = warnings = overflows = matched = 0
    first_divergent = first_overflow = None
    for node in target.walk():
        if node.matched is not None:
            matched += 1
        index = node.precision_index
        if index is not None and node.matched is not None:
            if index >= ERROR_AT:
                errors += 1
            elif index >= WARNING_AT:
                warnings += 1
            if index >= WARNING_AT and first_divergent is None:
                first_divergent = node.name
        if node.overflow_level:
            overflows += 1
            if first_overflow is None and node.overflow_level == "critical":
                first_overflow = node.name
    return GraphSummary(target.step, target.rank, len(target), len(bench) if bench else None, matched,
                        errors, warnings, overflows, first_divergent, first_overflow)


def print_summary(summaries: Sequence[GraphSummary], output: str, compare: bool) -> None:
    """Print one table (one row per step/rank) and where the file went: in colour through rich on a terminal,
    as plain text elsewhere (a pipe, a log: rich is not even imported)."""
    colour = sys.stdout is not None and sys.stdout.isatty()
    if colour:
        from rich.markup import escape
    else:
        escape = str  # type: ignore[assignment]

    def paint(text: str, style: str) -> str:
        return f"[{style}]{escape(text)}[/]" if colour else text

    columns = ["step", "rank", "nodes"] + (["bench nodes", "matched", "errors", "warnings"] if compare else [])
    columns += ["overflows"]
    rows: list[tuple[list[str], list[str]]] = []  # (cells, each cell's style: "" for none)
    firsts = []  # node names go below the table, whole: a column would cut them
    label = "first divergent node" if compare else "first overflow (critical)"
    job = next((s.job_first for s in summaries if s.job_first), None) if compare else None
    shown = abridged(len(summaries), [i for i, s in enumerate(summaries)
                                      if job and job.startswith(f"step {s.step} rank {s.rank}: ")])
    skipped = dict(gaps(shown, len(summaries)))
    for index in [*shown, len(summaries)]:
        if index in skipped:
            rows.append((["..."] * len(columns), ["grey50"] * len(columns)))
        if index == len(summaries):
            break
        s = summaries[index]
        cells = [str(s.step), str(s.rank), str(s.nodes)]
        styles = [""] * 3
        if compare:
            cells += [str(s.bench_nodes), str(s.matched), str(s.errors), str(s.warnings)]
            styles += ["", "", "red" if s.errors else "", "yellow" if s.warnings else ""]
        rows.append(([*cells, str(s.overflows)], [*styles, ""]))
        first = s.first_divergent if compare else s.first_overflow
        if first:
            firsts.append(f"step {s.step} rank {s.rank}: {label} {paint(first, 'red')}")
    lines = ["probe graph", *_table(columns, rows, paint)]
    if skipped:
        lines.append(f"{sum(skipped.values())} of {len(summaries)} graphs not shown (the file has them all)")
    lines += firsts
    unnamed = sum(1 for s in summaries if (s.first_divergent if compare else s.first_overflow)) - len(firsts)
    if unnamed:
        lines.append(paint(f"... and {unnamed} more graphs with a {label} (the file has them all)", "grey50"))
    if job and len(firsts) + unnamed > 1:
        lines.append(f"first divergence of the job: {paint(job, 'red')}")
    lines.append(f"graph file: {paint(output, 'bold')}  (view it: probe graph --serve {escape(_folder(output))})")
    if colour:
        from rich.console import Console

        Console().print("\n".join(lines), highlight=False, soft_wrap=True)
    else:
        print("\n".join(lines), flush=True)


def _table(columns: list[str], rows: list[tuple[list[str], list[str]]], paint: Callable[[str, str], str]) -> list[str]:
    """The lines of a table drawn as rich draws its default one (a heavy head), each cell painted its style."""
    widths = [max(len(column), *(len(cells[at]) for cells, _ in rows)) for at, column in enumerate(columns)]

    def line(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (width + 2) for width in widths) + right

    def cells(texts: list[str], styles: list[str], bar: str) -> str:
        return bar + bar.join(" " + (paint(text, style) if style else text) + " " * (width - len(text) + 1)
                              for text, style, width in zip(texts, styles, widths)) + bar

    return [line("┏", "━", "┳", "┓"), cells(columns, [""] * len(columns), "┃"), line("┡", "━", "╇", "┩"),
            *(cells(texts, styles, "│") for texts, styles in rows), line("└", "─", "┴", "┘")]


def _folder(output: str) -> str:
    from pathlib import Path

    return str(Path(output).parent)
