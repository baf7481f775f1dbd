"""A :class:`~probe_report.model.Report` of what ``probe monitor compare`` wrote: ``summary.json`` (where the runs
part) and ``monitor_compare.csv`` (rank, step, quantity, parameter, both runs' statistics, rel_diff, threshold); and
what each run's monitor logged as it trained, its rank folders' ``anomalies.json`` (NaN/Inf, spikes)."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from probe_core.api import CompareError
from probe_report.model import Answer, Chart, HeatMap, Listing, Node, Report, Series, Table, number, short

CSV_NAME = "monitor_compare.csv"
REQUIRED = ("rank", "step", "quantity", "name", "module", "rel_diff", "threshold", "parts")
MAX_TABLE_ROWS = 20_000
MAX_RANKS_DRAWN = 8
ANOMALIES = "anomalies.json"  # what probe monitor logs in each rank folder of a run, as it trains
MAX_ANOMALIES_LISTED = 50
ANOMALY_KEYS = ("step", "rank", "metric", "name", "kind", "detail")


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
            if missing:
                raise CompareError(f"{path}: no column {missing[0]!r} in its header; pass the output folder of "
                                   "probe monitor compare, unmodified")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CompareError(f"{path}: cannot be read as probe monitor compare's CSV ({exc}); run probe monitor "
                           "compare again into a new folder") from None
    for line, row in enumerate(rows, start=2):
        try:
            row["_rank"], row["_step"] = int(row["rank"]), int(row["step"])
        except (TypeError, ValueError):
            raise CompareError(f"{path}: line {line}: rank {row.get('rank')!r} / step {row.get('step')!r} are not "
                               "whole numbers; run probe monitor compare again into a new folder") from None
    return rows


def _stat(row: dict[str, str], side: str, op: str = "norm") -> float:
    value = number(row.get(f"{side} {op}", ""))
    return math.nan if value is None else value


def read_monitor(folder: Path, summary: dict[str, Any], summary_path: Path) -> Report:
    path = folder / CSV_NAME
    if not path.is_file():
        raise CompareError(f"{summary_path}: {CSV_NAME} is not beside it; pass the folder probe monitor compare "
                           "wrote, with its CSV")
    rows = _rows(path)
    first = summary.get("first_divergence") or None
    labels = (str(summary.get("a", "A")), str(summary.get("b", "B")))
    report = Report("monitor compare", "probe monitor compare",
                    [("A (under test)", labels[0]), ("B (benchmark)", labels[1]), ("monitor compare", str(folder))],
                    _answer(summary, first, labels))
    parting = sum(r["parts"] == "True" for r in rows)
    report.counts = [("rows", len(rows)), ("parting", parting), ("NaN/Inf", sum(bool(r.get("nan_inf")) for r in rows))]
    rank = first["rank"] if first else (rows[0]["_rank"] if rows else 0)
    logged = _logged_anomalies(summary, folder, report.answer.notes)
    report.charts = _charts(rows, first, rank, labels, [a for a in logged if a[1]["rank"] == rank])
    if logged:
        report.listings.append(_anomaly_listing(logged))
    ranks = sorted({r["_rank"] for r in rows}, key=lambda r: (r != rank, r))
    report.heatmaps = [_heat_map([r for r in rows if r["_rank"] == k], first, k) for k in ranks[:MAX_RANKS_DRAWN]]
    if report.heatmaps and len(ranks) > MAX_RANKS_DRAWN:
        report.heatmaps[-1].note = f"{len(ranks) - MAX_RANKS_DRAWN} more ranks are in {CSV_NAME}"
    if first:
        report.tree = _tree(rows, first)
        report.tree_title = f"{first['quantity']} at step {first['step']}, rank {first['rank']}"
    report.table = _table(rows, path)
    return report


def _answer(summary: dict[str, Any], first: dict | None, labels: tuple[str, str]) -> Answer:
    if not first:
        how = "agree at every step" if summary.get("complete") else "agree where both have rows (not all compared)"
        return Answer(False, f"No divergence: the runs {how} ({summary.get('rows', 0)} rows compared)")
    step, rank, quantity, name = first["step"], first["rank"], first["quantity"], first["name"]
    answer = Answer(True, f"The runs part at step {step}, rank {rank}: {quantity} of {name}")
    if first.get("nan_inf"):
        values = ", ".join(f"{op} A={first['a'].get(op)} B={first['b'].get(op)}" for op in first["nan_inf"])
        answer.reason = f"NaN/Inf on one side only: {values}"
    else:
        answer.reason = (f"relative difference {short(number(first.get('rel_diff')))} > threshold "
                         f"{short(first.get('threshold'))} (the larger of --rtol and --noise-factor x the "
                         f"{short(first.get('noise'))} this quantity differed by at earlier steps)")
    answer.facts = [("step", str(step)), ("rank", str(rank)), ("quantity", quantity), ("parameter", name),
                    ("module", first.get("module") or "<root>")]
    if first.get("micro_step") is not None:
        answer.facts.append(("micro-step", str(first["micro_step"])))
    zoom = {"task": "statistics", "level": "mix", "step": [step], "rank": [rank]}
    answer.next_steps = [("Dump step %d of both runs, every module and API (zoom.json)" % step, json.dumps(zoom)),
                         ("then, for each run", "probe run -c zoom.json --dump-path target_zoom YOUR_SCRIPT ARGS..."),
                         ("and name the first entry that diverges", "probe compare target_zoom bench_zoom -o compare_zoom")]
    answer.notes = [f"A: {labels[0]}", f"B: {labels[1]}"]
    return answer


def _run_folder(label: str, folder: Path) -> Path | None:
    """A run summary.json names as it was given to monitor compare: absolute, or relative to where that ran (here,
    or the compare folder's parent)."""
    path = Path(label)
    return next((p for p in ([path] if path.is_absolute() else [Path.cwd() / path, folder.parent / path])
                 if p.is_dir()), None)


def _logged_anomalies(summary: dict[str, Any], folder: Path, notes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(``A`` or ``B``, anomaly) for every anomaly the two runs' monitors logged, by step; what cannot be read is
    said in ``notes`` (the page shows the rest)."""
    found = []
    for side, key in (("A", "a"), ("B", "b")):
        label = str(summary.get(key) or "")
        run = _run_folder(label, folder) if label else None
        if run is None and label:
            notes.append(f"{side}'s logged anomalies (spikes) are not shown: its run folder {label!r} is not found "
                         "from here; run probe report where probe monitor compare ran")
        if run is None:
            continue
        for path in sorted([*run.glob(ANOMALIES), *run.glob(f"*/{ANOMALIES}")]):
            try:
                logged = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(logged, list) or not all(isinstance(a, dict) and all(k in a for k in ANOMALY_KEYS)
                                                           and isinstance(a["step"], int) and isinstance(a["rank"], int)
                                                           for a in logged):
                    raise ValueError(f"not a list of anomalies with {', '.join(ANOMALY_KEYS)}")
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                notes.append(f"{path}: not shown ({exc}); it is probe monitor's log of the run: run it again to "
                             "rewrite it")
                continue
            found += [(side, a) for a in logged]
    return sorted(found, key=lambda found: (found[1]["step"], found[0]))


def _anomaly_listing(logged: list[tuple[str, dict[str, Any]]]) -> Listing:
    listing = Listing("anomalies", f"Anomalies the monitors logged as the runs trained ({len(logged)}), by step",
                      ["step", "rank", "run", "quantity", "parameter", "kind", "what"], [], [])
    for side, a in logged[:MAX_ANOMALIES_LISTED]:
        listing.rows.append([str(a["step"]), str(a["rank"]), side, str(a["metric"]), str(a["name"]), str(a["kind"]),
                             str(a["detail"])])
        listing.results.append("error" if a["kind"] == "nan/inf" else "warning")
    if len(logged) > MAX_ANOMALIES_LISTED:
        listing.note = f"{len(logged) - MAX_ANOMALIES_LISTED} more in the runs' {ANOMALIES} files"
    return listing


def _marks(rows: list[dict], rank: int, logged: list[tuple[str, dict[str, Any]]]) -> list[tuple[float, str, str]]:
    """The chart's anomaly marks: NaN/Inf where the compare met it (a row of ``rank``), one a step; and the spikes
    the runs' monitors logged at ``rank``, one a step and run."""
    marks: dict[tuple[int, str, str], list[str]] = {}  # (step, kind, run) -> what
    for r in rows:
        if r.get("nan_inf") and r["_rank"] == rank:
            marks.setdefault((r["_step"], "nan-inf", ""), []).append(f"{r['quantity']} of {r['name']}")
    for side, a in logged:
        if a["kind"] != "nan/inf":  # NaN/Inf: the compare's rows say it (on the side it happened)
            marks.setdefault((a["step"], "spike", side), []).append(f"{a['metric']} of {a['name']}: {a['detail']}")
    out = []
    for (step, kind, side), what in sorted(marks.items()):
        head = "NaN/Inf" if kind == "nan-inf" else f"{len(what)} spike{'s' if len(what) > 1 else ''} in {side}"
        more = f"; ... ({len(what)} in all)" if len(what) > 3 else ""
        out.append((float(step), kind, f"step {step}: {head}: " + "; ".join(what[:3]) + more))
    return out


def _charts(rows: list[dict], first: dict | None, rank: int, labels: tuple[str, str],
            logged: list[tuple[str, dict[str, Any]]]) -> list[Chart]:
    mark = [(float(first["step"]), "runs part")] if first else []
    anomalies = _marks(rows, rank, logged)
    charts = []
    norms = sorted((r for r in rows if r["quantity"] == "grad_norm" and r["_rank"] == rank), key=lambda r: r["_step"])
    if norms:
        charts.append(Chart(f"gradient norm per step (rank {rank})", "step", "global gradient norm",
                            [Series(f"A: {labels[0]}", [(r["_step"], _stat(r, "A")) for r in norms], "a"),
                             Series(f"B: {labels[1]}", [(r["_step"], _stat(r, "B")) for r in norms], "b")],
                            marks=mark, anomalies=anomalies))
    if first:
        series = sorted((r for r in rows if r["_rank"] == rank and r["quantity"] == first["quantity"]
                         and r["name"] == first["name"] and str(first.get("micro_step") or "") == r.get("micro_step", "")),
                        key=lambda r: r["_step"])
        what = f"{first['quantity']} of {first['name']}"
        charts.append(Chart(f"{what}: norm per step", "step", "norm",
                            [Series(f"A: {labels[0]}", [(r["_step"], _stat(r, "A")) for r in series], "a"),
                             Series(f"B: {labels[1]}", [(r["_step"], _stat(r, "B")) for r in series], "b")],
                            marks=mark, anomalies=anomalies))
        charts.append(Chart(f"{what}: relative difference and threshold", "step", "relative difference",
                            [Series("relative difference", [(r["_step"], number(r["rel_diff"]) or 0.0) for r in series],
                                    "error"),
                             Series("threshold (earlier noise)", [(r["_step"], number(r["threshold"]) or 0.0)
                                                                  for r in series], "threshold")],
                            log_y=True, marks=mark))
    return charts


def _heat_map(rows: list[dict], first: dict | None, rank: int) -> HeatMap:
    """The largest relative difference over the quantities, per module (record order) and step."""
    steps = sorted({r["_step"] for r in rows})
    modules: dict[str, None] = {}
    worst: dict[tuple[str, int], float] = defaultdict(float)
    for row in rows:
        module = row["module"] or row["name"]
        modules.setdefault(module, None)
        diff = number(row["rel_diff"])
        diff = math.inf if diff is None or math.isnan(diff) else diff
        worst[module, row["_step"]] = max(worst[module, row["_step"]], diff)
    names = list(modules)
    heat = HeatMap(f"largest relative difference per module and step (rank {rank})", names,
                   [f"step {s}" for s in steps], [[worst.get((m, s)) for s in steps] for m in names])
    if first and first["rank"] == rank:
        module = first.get("module") or first["name"]
        if module in modules and first["step"] in steps:
            heat.mark = (names.index(module), steps.index(first["step"]))
    return heat


def _tree(rows: list[dict], first: dict) -> Node:
    """Modules from the parameter names (``blocks.0.attn.qkv.weight``), at the parting step and quantity; the path
    to the parting parameter open; each parameter with both runs' statistics."""
    at = [r for r in rows if r["_rank"] == first["rank"] and r["_step"] == first["step"]
          and r["quantity"] == first["quantity"]]
    root = Node(f"{first['quantity']}, step {first['step']}", open=True)
    ops = [h[2:] for h in (at[0] if at else {}) if h.startswith("A ")]
    for row in at:
        node = root
        parts = row["name"].split(".")
        for depth in range(1, len(parts)):
            prefix = ".".join(parts[:depth])
            child = next((c for c in node.children if c.name == prefix), None)
            if child is None:
                child = Node(prefix)
                node.children.append(child)
            node = child
        leaf = Node(row["name"], result="error" if row["parts"] == "True" else "pass", error=number(row["rel_diff"]))
        leaf.stats = [(f"{row['quantity']} ({' / '.join(ops)})",
                       *(" / ".join(short(_stat(row, side, op)) for op in ops) for side in ("A", "B")))]
        node.children.append(leaf)
        if row["name"] == first["name"] and (row.get("micro_step") or "") == str(first.get("micro_step") or ""):
            leaf.culprit = leaf.open = True
            _open_path(root, row["name"])
    return root


def _open_path(node: Node, name: str) -> None:
    for child in node.children:
        if name == child.name or name.startswith(child.name + "."):
            child.open = True
            _open_path(child, name)


def _table(rows: list[dict], path: Path) -> Table:
    ops = [h for h in rows[0] if h[:2] in ("A ", "B ")] if rows else []
    columns = ["rank", "step", "micro_step", "quantity", "name", "module", *ops, "nan_inf", "rel_diff", "threshold",
               "parts"]
    table = Table(columns, [], files=[path.resolve().as_uri()], name_column="name", result_column="parts")
    chosen = list(enumerate(rows, start=1))
    if len(chosen) > MAX_TABLE_ROWS:
        table.left_out = len(chosen) - MAX_TABLE_ROWS
        chosen = sorted(sorted(chosen, key=lambda c: c[1]["parts"] != "True")[:MAX_TABLE_ROWS], key=lambda c: c[0])
    for line, row in chosen:
        table.rows.append([_cell(row.get(c, "")) if c in ops or c in ("rel_diff", "threshold") else row.get(c, "")
                           for c in columns])
        table.origins.append((0, line))
    return table


def _cell(text: str) -> str:
    value = number(text)
    return short(value) if value is not None else text
