"""The one-page summary ``probe graph`` prints: nodes, matched, errors, warnings, first divergence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from probe_core.api import abridged, gaps, Graph
from probe_graph.precision import ERROR_AT, WARNING_AT


@dataclass(frozen=True)
class GraphSummary:
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
    """Print one rich table (one row per step/rank) and where the file went."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="probe graph", title_justify="left")
    columns = ["step", "rank", "nodes"] + (["bench nodes", "matched", "errors", "warnings"] if compare else [])
    columns += ["overflows"]
    for column in columns:
        table.add_column(column, no_wrap=True)
    firsts = []  # node names go below the table, whole: a column would cut them
    label = "first divergent node" if compare else "first overflow (critical)"
    job = next((s.job_first for s in summaries if s.job_first), None) if compare else None
    shown = abridged(len(summaries), [i for i, s in enumerate(summaries)
                                      if job and job.startswith(f"step {s.step} rank {s.rank}: ")])
    skipped = dict(gaps(shown, len(summaries)))
    for index in [*shown, len(summaries)]:
        if index in skipped:
            table.add_row(*["..."] * len(columns), style="grey50")
        if index == len(summaries):
            break
        s = summaries[index]
        row = [str(s.step), str(s.rank), str(s.nodes)]
        if compare:
            row += [str(s.bench_nodes), str(s.matched), f"[red]{s.errors}[/]" if s.errors else "0",
                    f"[yellow]{s.warnings}[/]" if s.warnings else "0"]
        row += [str(s.overflows)]
        table.add_row(*row)
        first = s.first_divergent if compare else s.first_overflow
        if first:
            firsts.append(f"step {s.step} rank {s.rank}: {label} [red]{escape(first)}[/]")
    if skipped:
        table.caption = f"{sum(skipped.values())} of {len(summaries)} graphs not shown (the file has them all)"
    unnamed = sum(1 for s in summaries if (s.first_divergent if compare else s.first_overflow)) - len(firsts)
    console = Console()
    console.print(table)
    for line in firsts:
        console.print(line, highlight=False, soft_wrap=True)
    if unnamed:
        console.print(f"[grey50]... and {unnamed} more graphs with a {label} (the file has them all)[/]")
    if job and len(firsts) + unnamed > 1:
        console.print(f"first divergence of the job: [red]{escape(job)}[/]", highlight=False, soft_wrap=True)
    console.print(f"graph file: [bold]{escape(output)}[/]  (view it: probe graph --serve {escape(_folder(output))})")


def _folder(output: str) -> str:
    from pathlib import Path

    return str(Path(output).parent)
