"""What ``probe monitor compare`` writes: ``monitor_compare.csv``/``.xlsx``, ``summary.json``, a PNG plot, a table.

A NaN/Inf on one side is named as such (``nan_inf``: the statistics concerned) in every one of them, and
rows or statistics only one run has are counted (``unmatched``) and printed: the report says "agree"
only when every row of both runs was compared."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_core.api import writing
from probe_monitor.compare.diff import Comparison, Pair

CSV_NAME, XLSX_NAME, PLOT_NAME, SUMMARY_NAME = "monitor_compare.csv", "monitor_compare.xlsx", \
    "first_divergence.png", "summary.json"


#: one-sided NaN/Inf rows listed in summary.json (all are in the CSV)
NON_FINITE_LISTED = 20


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _text(value: float | str) -> str:
    """A number for a printed line: ``0.0123``, ``inf``, ``nan``."""
    return f"{float(value):.3g}"


def table(comparison: Comparison) -> tuple[list[str], list[list[Any]]]:
    ops: list[str] = []
    for pair in comparison.pairs:
        ops += [op for op in pair.a.stats if op not in ops]
    header = ["rank", "step", "micro_step", "quantity", "vpp_stage", "name", "module"]
    header += [f"{side} {op}" for op in ops for side in ("A", "B")] + ["nan_inf", "rel_diff", "threshold", "parts"]
    rows = []
    for p in comparison.pairs:
        values = [v for op in ops for v in (p.a.stats.get(op, math.nan), p.b.stats.get(op, math.nan))]
        rows.append([p.rank, p.a.step, "" if p.a.micro_step is None else p.a.micro_step, p.a.tag, p.a.vpp_stage,
                     p.a.name, p.a.module, *values, " ".join(p.non_finite), p.diff, p.threshold, p.parts])
    return header, rows


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        out.writerows(rows)


def write_xlsx(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    from openpyxl import Workbook
    from openpyxl.styles import Font, PatternFill

    book = Workbook()
    sheet = book.active
    sheet.title = "monitor compare"
    sheet.append(header)
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    red = PatternFill("solid", start_color="FFC7CE", end_color="FFC7CE")
    for row in rows:
        sheet.append([v if not isinstance(v, float) or math.isfinite(v) else str(v) for v in row])
        if row[-1]:
            for cell in sheet[sheet.max_row]:
                cell.fill = red
    sheet.freeze_panes = "A2"
    book.save(path)


def finding(p: Pair) -> dict[str, Any]:
    """One compared row as summary.json lists it: where, both sides' statistics, the NaN/Inf ones."""
    return {"step": p.a.step, "rank": p.rank, "quantity": p.a.tag, "name": p.a.name, "module": p.a.module,
            "micro_step": p.a.micro_step, "nan_inf": p.non_finite,
            "a": {k: _json_number(v) for k, v in p.a.stats.items()},
            "b": {k: _json_number(v) for k, v in p.b.stats.items()}}


def first_json(comparison: Comparison) -> dict[str, Any] | None:
    p = comparison.first
    if p is None:
        return None
    return finding(p) | {"rel_diff": _json_number(p.diff), "threshold": p.threshold,
                         "noise": comparison.noise.get(p.a.tag, 0.0)}


def unmatched_json(comparison: Comparison) -> dict[str, Any]:
    return {"only_in_a": comparison.only_a.as_json(), "only_in_b": comparison.only_b.as_json(),
            "rows_without_a_common_statistic": comparison.no_common_statistic}


def at_first_step(comparison: Comparison) -> list[dict[str, Any]]:
    """Per quantity at the first parting step: largest difference, threshold, how many rows part."""
    if comparison.first is None:
        return []
    step = comparison.first.a.step
    grouped: dict[str, list[Pair]] = defaultdict(list)
    for pair in comparison.pairs:
        if pair.a.step == step:
            grouped[pair.a.tag].append(pair)
    return [{"quantity": tag, "max_rel_diff": _json_number(max(p.diff for p in pairs)),
             "threshold": pairs[0].threshold, "parting": sum(p.parts for p in pairs),
             "nan_inf": sum(bool(p.non_finite) for p in pairs), "rows": len(pairs)}
            for tag, pairs in grouped.items()]


def plot(path: Path, comparison: Comparison, labels: tuple[str, str]) -> None:
    """The parting quantity of the named parameter over every step, both runs, and their difference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = comparison.first
    stat = "norm" if "norm" in first.a.stats else next(iter(first.a.stats))
    series = sorted((p for p in comparison.pairs if p.rank == first.rank and p.a.tag == first.a.tag
                     and p.a.name == first.a.name and p.a.micro_step == first.a.micro_step), key=lambda p: p.a.step)
    steps = [p.a.step for p in series]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.plot(steps, [p.a.stats.get(stat, math.nan) for p in series], "o-", label=f"A: {labels[0]}")
    top.plot(steps, [p.b.stats.get(stat, math.nan) for p in series], "x--", label=f"B: {labels[1]}")
    top.set_ylabel(stat)
    top.set_title(f"{first.a.tag} of {first.a.name} (rank {first.rank}): runs part at step {first.a.step}")
    top.legend()
    bottom.plot(steps, [min(p.diff, 1e12) for p in series], "o-", color="tab:red", label="relative difference")
    bottom.plot(steps, [p.threshold for p in series], ":", color="gray", label="threshold (earlier noise)")
    bottom.set_yscale("symlog", linthresh=1e-9)
    bottom.set_xlabel("step")
    bottom.legend()
    for axis in (top, bottom):
        axis.axvline(first.a.step, color="tab:red", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _where(p: Pair) -> str:
    micro = f" micro-step {p.a.micro_step}" if p.a.micro_step is not None else ""
    return f"step {p.a.step}{micro}, rank {p.rank}: {p.a.tag} of {p.a.name} (module {p.a.module or '<root>'})"


def headline(comparison: Comparison) -> str:
    """The verdict, one line of plain text."""
    first = comparison.first
    if first is None:
        worst = max((p.diff for p in comparison.pairs), default=0.0)
        within = f"{len(comparison.pairs)} rows, largest relative difference {_text(worst)}, within noise"
        if comparison.complete:
            return f"probe monitor compare: the runs agree at every step ({within})"
        return (f"probe monitor compare: no divergence in the rows both runs have ({within}), but not everything "
                "was compared:")
    if first.non_finite:
        values = ", ".join(f"{op} A={first.a.stats[op]:.6g} B={first.b.stats[op]:.6g}" for op in first.non_finite)
        return f"The runs part at {_where(first)}: NaN/Inf on one side ({values})"
    return (f"The runs part at {_where(first)}, relative difference {_text(first.diff)} > "
            f"{_text(first.threshold)}")


def nothing_in_common(unmatched: dict[str, Any], labels: tuple[str, str]) -> str:
    """Why two outputs have nothing to compare (``unmatched``: summary.json's), and what to do."""
    a, b = unmatched["only_in_a"], unmatched["only_in_b"]
    if unmatched["rows_without_a_common_statistic"]:
        why = (f"their rows record no statistic in common ({labels[0]}: {', '.join(a['statistics'])}; "
               f"{labels[1]}: {', '.join(b['statistics'])})")
    else:
        why = f"they have no row in common ({labels[0]}: {_rows(a)}; {labels[1]}: {_rows(b)})"
    return (f"probe monitor compare: nothing to compare between {labels[0]} and {labels[1]}: {why}; compare two runs "
            "of the same model monitored with the same config")


def _rows(unmatched: dict) -> str:
    return f"{', '.join(unmatched['quantities'])} at steps {unmatched['steps']}" if unmatched["rows"] else "no rows"


def not_compared(comparison: Comparison) -> list[str]:
    """What one run has and the other does not, one line each (none when everything was compared)."""
    lines = []
    for side, unmatched in (("A", comparison.only_a), ("B", comparison.only_b)):
        if unmatched.rows:
            lines.append(f"not compared: {unmatched.describe()} only in {side}")
        if unmatched.statistics:
            lines.append(f"not compared: statistics only {side} records: {', '.join(sorted(unmatched.statistics))}")
    if comparison.no_common_statistic:
        lines.append(f"not compared: {comparison.no_common_statistic} rows whose two sides share no statistic")
    return lines


def print_table(comparison: Comparison, summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    first = comparison.first
    style = "green" if first is None and comparison.complete else "yellow" if first is None else "bold red"
    console.print(f"[{style}]{escape(headline(comparison))}[/]", highlight=False, soft_wrap=True)
    for line in not_compared(comparison):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
    non_finite = comparison.non_finite
    if non_finite:
        where = "" if non_finite[0] is first else f"; the first: {_where(non_finite[0])}"
        console.print(f"[red]NaN/Inf on one side in {len(non_finite)} rows{escape(where)}[/]", highlight=False,
                      soft_wrap=True)
    if first is None:
        return
    view = Table(title=f"step {first.a.step} along the update chain")
    for column in ("quantity", "max rel diff", "threshold", "rows parting", "NaN/Inf rows"):
        view.add_column(column)
    for item in summary["quantities_at_first_step"]:
        style = "red" if item["parting"] else ""
        view.add_row(escape(item["quantity"]), _text(item["max_rel_diff"]), _text(item["threshold"]),
                     f"{item['parting']} / {item['rows']}", str(item["nan_inf"]), style=style)
    console.print(view)


def write_report(comparison: Comparison, out: Path, labels: tuple[str, str], *, xlsx: bool = True,
                 rtol: float, noise_factor: float, tables: bool = True) -> dict[str, Any]:
    """Write every result file into ``out`` (checked by the caller; ``tables`` False: summary.json alone, without
    the CSV, XLSX and plot); a failed write is one error line."""
    written: list[str] = []

    def write(name: str, how: Callable[[Path], None]) -> None:
        try:
            how(out / name)
        except OSError as exc:
            exc.filename = exc.filename or str(out / name)  # a failed write() names no file
            raise
        written.append(name)

    with writing(f"the monitor compare results in {out}", lambda: written):
        xlsx, plotted = xlsx and tables, tables and comparison.first is not None
        if tables:
            header, rows = table(comparison)
            write(CSV_NAME, lambda path: write_csv(path, header, rows))
        if xlsx:
            write(XLSX_NAME, lambda path: write_xlsx(path, header, rows))
        if plotted:
            write(PLOT_NAME, lambda path: plot(path, comparison, labels))
        steps = sorted({p.a.step for p in comparison.pairs})
        summary = {"a": labels[0], "b": labels[1], "ranks": comparison.ranks,
                   "steps": [steps[0], steps[-1]] if steps else [], "rows": len(comparison.pairs),
                   "only_in_a": len(comparison.only_a), "only_in_b": len(comparison.only_b),
                   "complete": comparison.complete, "unmatched": unmatched_json(comparison),
                   "rtol": rtol, "noise_factor": noise_factor, "first_divergence": first_json(comparison),
                   "nan_inf": {"rows": len(comparison.non_finite),
                               "first": [finding(p) for p in comparison.non_finite[:NON_FINITE_LISTED]]},
                   "quantities_at_first_step": at_first_step(comparison),
                   "csv": str(out / CSV_NAME) if tables else None, "xlsx": str(out / XLSX_NAME) if xlsx else None,
                   "plot": str(out / PLOT_NAME) if plotted else None}
        write(SUMMARY_NAME, lambda path: path.write_text(json.dumps(summary, indent=1, allow_nan=False)))
    return summary
