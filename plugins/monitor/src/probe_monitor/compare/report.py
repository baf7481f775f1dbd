"""What ``probe monitor compare`` writes: ``monitor_compare.csv``/``.xlsx``, ``summary.json``, a PNG plot, a table."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from probe_monitor.compare.diff import Comparison, Pair

CSV_NAME, XLSX_NAME, PLOT_NAME, SUMMARY_NAME = "monitor_compare.csv", "monitor_compare.xlsx", \
    "first_divergence.png", "summary.json"


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def table(comparison: Comparison) -> tuple[list[str], list[list[Any]]]:
    ops: list[str] = []
    for pair in comparison.pairs:
        ops += [op for op in pair.a.stats if op not in ops]
    header = ["rank", "step", "micro_step", "quantity", "vpp_stage", "name", "module"]
    header += [f"{side} {op}" for op in ops for side in ("A", "B")] + ["rel_diff", "threshold", "parts"]
    rows = []
    for p in comparison.pairs:
        values = [v for op in ops for v in (p.a.stats.get(op, math.nan), p.b.stats.get(op, math.nan))]
        rows.append([p.rank, p.a.step, "" if p.a.micro_step is None else p.a.micro_step, p.a.tag, p.a.vpp_stage,
                     p.a.name, p.a.module, *values, p.diff, p.threshold, p.parts])
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


def first_json(comparison: Comparison) -> dict[str, Any] | None:
    p = comparison.first
    if p is None:
        return None
    return {"step": p.a.step, "rank": p.rank, "quantity": p.a.tag, "name": p.a.name, "module": p.a.module,
            "micro_step": p.a.micro_step, "rel_diff": _json_number(p.diff), "threshold": p.threshold,
            "noise": comparison.noise.get(p.a.tag, 0.0),
            "a": {k: _json_number(v) for k, v in p.a.stats.items()},
            "b": {k: _json_number(v) for k, v in p.b.stats.items()}}


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
             "threshold": pairs[0].threshold, "parting": sum(p.parts for p in pairs), "rows": len(pairs)}
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
    top.plot(steps, [p.a.stats[stat] for p in series], "o-", label=f"A: {labels[0]}")
    top.plot(steps, [p.b.stats[stat] for p in series], "x--", label=f"B: {labels[1]}")
    top.set_ylabel(stat)
    top.set_title(f"{first.a.tag} of {first.a.name} (rank {first.rank}): runs part at step {first.a.step}")
    top.legend()
    bottom.plot(steps, [min(p.diff, 1e300) for p in series], "o-", color="tab:red", label="relative difference")
    bottom.plot(steps, [p.threshold for p in series], ":", color="gray", label="threshold (earlier noise)")
    bottom.set_yscale("symlog", linthresh=1e-9)
    bottom.set_xlabel("step")
    bottom.legend()
    for axis in (top, bottom):
        axis.axvline(first.a.step, color="tab:red", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def print_table(comparison: Comparison, summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    first = summary["first_divergence"]
    if first is None:
        worst = max((p.diff for p in comparison.pairs), default=0.0)
        console.print(f"[green]probe monitor compare: the runs agree at every step[/] ({len(comparison.pairs)} rows, "
                      f"largest relative difference {worst:.3g}, within noise)")
        return
    console.print(f"[bold red]The runs part at step {first['step']}[/], rank {first['rank']}: "
                  f"[bold]{escape(first['quantity'])}[/] of [bold]{escape(first['name'])}[/] "
                  f"(module {escape(first['module'] or '<root>')}), "
                  f"relative difference {first['rel_diff']:.3g} > {first['threshold']:.3g}", highlight=False)
    view = Table(title=f"step {first['step']} along the update chain")
    for column in ("quantity", "max rel diff", "threshold", "rows parting"):
        view.add_column(column)
    for item in summary["quantities_at_first_step"]:
        style = "red" if item["parting"] else ""
        view.add_row(escape(item["quantity"]), f"{float(item['max_rel_diff']):.3g}", f"{item['threshold']:.3g}",
                     f"{item['parting']} / {item['rows']}", style=style)
    console.print(view)


def write_report(comparison: Comparison, out: Path, labels: tuple[str, str], *, xlsx: bool = True,
                 rtol: float, noise_factor: float) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    header, rows = table(comparison)
    write_csv(out / CSV_NAME, header, rows)
    if xlsx:
        write_xlsx(out / XLSX_NAME, header, rows)
    if comparison.first is not None:
        plot(out / PLOT_NAME, comparison, labels)
    steps = sorted({p.a.step for p in comparison.pairs})
    summary = {"a": labels[0], "b": labels[1], "ranks": comparison.ranks, "steps": [steps[0], steps[-1]] if steps else [],
               "rows": len(comparison.pairs), "only_in_a": comparison.only_a, "only_in_b": comparison.only_b,
               "rtol": rtol, "noise_factor": noise_factor, "first_divergence": first_json(comparison),
               "quantities_at_first_step": at_first_step(comparison), "csv": str(out / CSV_NAME),
               "xlsx": str(out / XLSX_NAME) if xlsx else None,
               "plot": str(out / PLOT_NAME) if comparison.first is not None else None}
    (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=1))
    return summary
