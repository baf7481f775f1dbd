"""A :class:`~probe_report.model.Report` of what ``probe compare`` wrote: ``summary.json`` (the first divergence,
per rank and step its CSV and dumps) and the ``compare_result_rank*.csv`` files (msprobe's columns)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_core.api import CompareError, argument_changes, parse_stack
from probe_report.compare_rows import NAME_COLUMN, Entry, discrepancy, entries, read_rows
from probe_report.model import Answer, Chart, HeatMap, Node, Report, Series, Table, number, short

LABEL = re.compile(r"rank(?P<rank>\d*)_step(?P<step>\d+)")
LOSS = re.compile(r"loss|cross_entropy", re.I)
MAX_TABLE_ROWS = 20_000  # rows carried into the page; the worst first (the others are in the CSVs)
MAX_RANKS_DRAWN = 8  # ranks with their own error curve and heat map (the culprit's first)
MAX_HEAT_ROWS = 300
MAX_CHILDREN = 120  # children listed under one node of the tree (around the culprit's path)
TABLE_COLUMNS = ("NPU max", "Bench max", "NPU min", "Bench min", "NPU mean", "Bench mean", "NPU l2norm",
                 "Bench l2norm", "Cosine", "MaxAbsErr", "Err_message")


@dataclass
class RankStep:
    """One rank at one step: its CSV's rows, grouped into entries in execution order."""

    label: str
    rank: int | None
    step: int | None
    csv: Path
    rows: list[dict[str, str]]
    entries: dict[str, Entry]
    target: Path | None  # its target dump.json, where it can still be found


def _origin(folder: Path, output: str) -> Path | None:
    """The folder ``probe compare`` ran in (summary.json's relative paths are relative to it): ``folder`` less
    the output path it was given, or None when the folder was moved or renamed since."""
    here = folder.resolve()
    given = Path(output)
    if given.is_absolute():
        return Path(given.anchor) if here == Path(output).resolve() else None
    for part in reversed([p for p in given.parts if p != "."]):
        if part != here.name:
            return None
        here = here.parent
    return here


def _located(text: str | None, origin: Path | None, fallbacks: list[Path]) -> Path | None:
    if not text:
        return None
    path = Path(text)
    candidates = [path] if path.is_absolute() else ([origin / path] if origin else [])
    return next((c for c in candidates + fallbacks if c.is_file()), None)


def _inside(text: str, output: str, folder: Path, step: int | None) -> list[Path]:
    """Where a result file summary.json names is in ``folder`` now: its place under the output folder, else its
    step folder or the folder itself (the result files are the folder's own, wherever it was moved)."""
    path, places = Path(text), []
    try:
        places.append(folder / path.relative_to(output))
    except ValueError:
        pass
    return places + [folder / f"step{step}" / path.name, folder / path.name]


def _rank_step(item: dict[str, Any], folder: Path, origin: Path | None, summary_path: Path,
               output: str) -> RankStep:
    label = str(item.get("label", ""))
    match = LABEL.search(label)
    rank = int(match["rank"]) if match and match["rank"] else None
    step = int(match["step"]) if match else None
    csv_text = item.get("csv")
    csv_path = next((p for p in _inside(str(csv_text), output, folder, step) if p.is_file()), None)
    if csv_path is None:
        raise CompareError(f"{summary_path}: ranks[{label}].csv {csv_text!r} is not in {folder}; pass the folder "
                           "probe compare wrote, with its CSV files beside summary.json")
    rows = read_rows(csv_path)
    return RankStep(label, rank, step, csv_path, rows, entries(rows), _located(item.get("target"), origin, []))


def read_compare(folder: Path, summary: dict[str, Any], summary_path: Path) -> Report:
    output = str(summary.get("output", ""))
    origin = _origin(folder, output)
    items = summary.get("ranks")
    if not isinstance(items, list):
        raise CompareError(f"{summary_path}: key 'ranks' missing or not a list; pass the folder probe compare wrote")
    results = [_rank_step(item, folder, origin, summary_path, output) for item in items if item.get("csv")]
    first = summary.get("first_divergence") or None
    culprit = _culprit(results, first)
    ranks = sorted({r.rank for r in results}, key=lambda r: (r != (culprit.rank if culprit else None), r or 0))
    drawn = ranks[:MAX_RANKS_DRAWN]
    report = Report("compare", "probe compare", [("target", str(summary.get("target", ""))),
                                                 ("bench", str(summary.get("bench", ""))), ("compare", str(folder))],
                    _answer(summary, first, culprit), counts=list((summary.get("counts") or {}).items()))
    report.charts = [c for c in [_loss_chart(results, culprit, first)] if c]
    report.charts += [_error_chart([r for r in results if r.rank == rank], first) for rank in drawn]
    report.heatmaps = [_heat_map([r for r in results if r.rank == rank], first) for rank in drawn]
    if len(ranks) > len(drawn):
        report.heatmaps[-1].note = f"{len(ranks) - len(drawn)} more ranks are in the CSVs and summary.json"
    if culprit is not None:
        report.tree = _tree(culprit, first)
        report.tree_title = f"rank {culprit.rank}, step {culprit.step}"
    report.table = _table(results)
    return report


def _culprit(results: list[RankStep], first: dict | None) -> RankStep | None:
    if not first:
        return None
    label = first.get("rank")
    return next((r for r in results if r.label == label), None) or next(
        (r for r in results if r.step == first.get("step") and r.rank == first.get("rank_id")), None)


def _answer(summary: dict[str, Any], first: dict | None, culprit: RankStep | None) -> Answer:
    counts = summary.get("counts") or {}
    if not first:
        compared = sum(v for k, v in counts.items() if k != "unmatched")
        headline = f"No divergence: the {compared} entries compared agree within noise"
        answer = Answer(False, headline)
        if counts.get("unmatched"):
            answer.notes.append(f"{counts['unmatched']} entries have no counterpart (rows 'unmatched' in the CSVs)")
        return answer
    name, step, rank = first.get("name", "?"), first.get("step"), first.get("rank_id")
    where = f" on rank {rank}" if rank is not None else ""
    changes = argument_changes(((r[NAME_COLUMN], r.get("Err_message", "")) for r in culprit.rows), name) \
        if culprit is not None else []
    called = f": called with {'; '.join(f'{c.argument} {c.values}' for c in changes)}" if changes else ""
    answer = Answer(True, f"{name} {first.get('kind') or 'diverges'} at step {step}{where}{called}",
                    reason=str(first.get("reason", "")), stack=parse_stack(first.get("stack")),
                    cause="; ".join(c.text() for c in changes))
    answer.facts = [("step", str(step)), ("rank", "-" if rank is None else str(rank)), ("entry", name),
                    ("module", str(first.get("module") or "-")), ("kind", str(first.get("kind") or "-")),
                    ("result", str(first.get("result") or "-"))]
    if first.get("bench_name") and first.get("bench_name") != name:
        answer.facts.append(("bench entry", str(first["bench_name"])))
    answer.next_steps = _next_steps(summary, first)
    return answer


def _next_steps(summary: dict[str, Any], first: dict) -> list[tuple[str, str]]:
    """The commands that zoom in on the first divergence (locate will come first here once it exists)."""
    name, step, rank = first["name"], first.get("step"), first.get("rank_id")
    steps = []
    if summary.get("mode") != "tensor":
        zoom = {"task": "tensor", "level": "mix", "list": [name], "step": [step]}
        if rank is not None:
            zoom["rank"] = [rank]
        steps += [("Dump this entry's tensors in both runs (zoom.json)", json.dumps(zoom)),
                  ("then, for each run", "probe run -c zoom.json --dump-path target_zoom YOUR_SCRIPT ARGS..."),
                  ("and compare the tensors", "probe compare target_zoom bench_zoom -o compare_zoom")]
    if not name.startswith(("Module.", "Cell.")):
        api = re.sub(r"\.(forward|backward)$", "", name)
        where = summary.get("target") or "TARGET_DUMP"
        steps.append(("Re-run the API alone against a float64 CPU benchmark",
                      f"probe acc-check -api_info {where} --step {step} --filter {api}"))
    return steps


def _loss_chart(results: list[RankStep], culprit: RankStep | None, first: dict | None) -> Chart | None:
    """Both runs' loss per step, from the last scalar output of a loss API (cross_entropy, mse_loss, ...)."""
    rank = culprit.rank if culprit else (results[0].rank if results else None)
    points_a, points_b, names = [], [], set()
    for result in sorted((r for r in results if r.rank == rank), key=lambda r: r.step or 0):
        for entry in reversed(result.entries.values()):
            if not (LOSS.search(entry.name) and entry.name.endswith(("forward", "forward.0"))):
                continue
            row = next((result.rows[i] for i in entry.rows if result.rows[i][NAME_COLUMN].endswith(".output.0")
                        and result.rows[i].get("NPU Tensor Shape", "").strip() == "[]"), None)
            if row is None:
                continue
            a, b = number(row.get("NPU mean", "")), number(row.get("Bench mean", ""))
            if a is not None and b is not None:
                points_a.append((result.step or 0, a))
                points_b.append((result.step or 0, b))
                names.add(entry.name)
            break
    if not points_a:
        return None
    marks = [(float(first["step"]), "first divergence")] if first and first.get("step") is not None else []
    return Chart(f"loss per step ({', '.join(sorted(names))})", "step", "loss",
                 [Series("target", points_a, "a"), Series("bench", points_b, "b")], marks=marks)


def _error_chart(results: list[RankStep], first: dict | None) -> Chart:
    """The error of every entry in execution order, step after step, the first divergence marked."""
    points, bands, marks, x = [], [], [], 0
    rank = results[0].rank if results else None
    for result in sorted(results, key=lambda r: r.step or 0):
        start = x
        for entry in result.entries.values():
            if first and result.label == first.get("rank") and entry.name == first.get("name"):
                marks.append((float(x), f"first divergence: {entry.name}"))
            points.append((float(x), entry.error if entry.error is not None else 0.0))
            x += 1
        bands.append((float(start), float(x - 1), f"step {result.step}"))
    title = "error of each entry, in execution order" + (f" (rank {rank})" if rank is not None else "")
    return Chart(title, "entry (execution order)", "relative discrepancy", [Series("target vs bench", points, "error")],
                 log_y=True, marks=marks, bands=bands)


def _heat_map(results: list[RankStep], first: dict | None) -> HeatMap:
    """Error added per module (rows in model order) and step; API entries where the dump holds no module."""
    results = sorted(results, key=lambda r: r.step or 0)
    names: dict[str, None] = {}
    for result in results:
        names.update((n, None) for n in result.entries if n.startswith(("Module.", "Cell.")) and
                     "parameters_grad" not in n)
    if not names:
        names = {n: None for result in results for n in result.entries}
    rows = list(names)
    values = [[(r.entries[n].added if n in r.entries else None) for r in results] for n in rows]
    rank = results[0].rank if results else None
    heat = HeatMap("error added per module and step" + (f" (rank {rank})" if rank is not None else ""), rows,
                   [f"step {r.step}" for r in results], values)
    mark_name = first and (first.get("module") if first.get("module") in names else first.get("name"))
    if len(rows) > MAX_HEAT_ROWS:
        keep = sorted(range(len(rows)), key=lambda i: -max((v or 0.0) for v in values[i]))[:MAX_HEAT_ROWS]
        keep = sorted(set(keep) | ({rows.index(mark_name)} if mark_name in names else set()))
        heat.note = f"{len(rows) - len(keep)} modules that add the least error are not shown"
        heat.rows, heat.values = [rows[i] for i in keep], [values[i] for i in keep]
    if first and mark_name in heat.rows:
        column = next((i for i, r in enumerate(results) if r.label == first.get("rank")), None)
        if column is not None:
            heat.mark = (heat.rows.index(mark_name), column)
    return heat


def _parents(result: RankStep) -> dict[str, str | None]:
    """Each entry's parent module: the dump's construct.json when it can be found, else from module names."""
    construct = result.target.parent / "construct.json" if result.target else None
    if construct is not None and construct.is_file():
        try:
            data = json.loads(construct.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            return {str(k): (str(v) if v else None) for k, v in data.items()}
    return {}


def _node(result: RankStep, name: str) -> Node:
    entry = result.entries.get(name)
    node = Node(name)
    if entry is None:
        return node
    node.result, node.error = entry.result, entry.error
    rows = sorted((result.rows[i] for i in entry.rows), key=lambda r: ".output" not in r[NAME_COLUMN])[:6]
    for row in rows:
        what = row[NAME_COLUMN][len(name) + 1:] + " (max / min / mean / norm)"
        node.stats.append((what, *(" / ".join(_cell(row.get(f"{side} {s}", "-"), 7) for s in ("max", "min", "mean", "l2norm"))
                                   for side in ("NPU", "Bench"))))
    return node


def _tree(result: RankStep, first: dict) -> Node:
    """The module tree of the culprit's rank and step: every node on the path to the culprit open, with its
    children; each node with both sides' statistics."""
    parents = _parents(result)
    for name in result.entries:
        parents.setdefault(name, None)
    children: dict[str | None, list[str]] = {}
    for name in result.entries:
        children.setdefault(parents.get(name), []).append(name)
    path, at = [], first.get("name")
    while at is not None and at not in path:
        path.append(at)
        at = parents.get(at)
    on_path = set(path)

    def build(name: str | None) -> list[Node]:
        kids = children.get(name, [])
        if len(kids) > MAX_CHILDREN:
            centre = next((i for i, k in enumerate(kids) if k in on_path), 0)
            start = max(0, min(centre - MAX_CHILDREN // 2, len(kids) - MAX_CHILDREN))
            kids = kids[start:start + MAX_CHILDREN]
        nodes = []
        for kid in kids:
            node = _node(result, kid)
            if kid in on_path:
                node.open, node.culprit = True, kid == first.get("name")
                node.children = build(kid)
            nodes.append(node)
        return nodes

    return Node(f"rank {result.rank}, step {result.step}", children=build(None), open=True)


def _table(results: list[RankStep]) -> Table:
    present = [c for c in TABLE_COLUMNS if any(c in r.rows[0] for r in results if r.rows)]
    table = Table(["step", "rank", NAME_COLUMN, "Result", "discrepancy", *present], [],
                  files=[r.csv.resolve().as_uri() for r in results])
    chosen = []
    for index, result in enumerate(results):
        for line, row in enumerate(result.rows, start=1):
            chosen.append((row.get("Result", "").strip().lower() == "pass", index, line, row))
    if len(chosen) > MAX_TABLE_ROWS:
        table.left_out = len(chosen) - MAX_TABLE_ROWS
        chosen = sorted(sorted(chosen, key=lambda c: c[0])[:MAX_TABLE_ROWS], key=lambda c: (c[1], c[2]))
    for _, index, line, row in chosen:
        result = results[index]
        cells = [str(result.step), "-" if result.rank is None else str(result.rank), row[NAME_COLUMN],
                 row.get("Result", ""), short(discrepancy(row))]
        table.rows.append(cells + [_cell(row.get(c, "")) for c in present])
        table.origins.append((index, line))
    return table


def _cell(text: str, digits: int = 4) -> str:
    value = number(text)
    return short(value, digits) if value is not None and not text.strip().endswith("%") else text.strip()[:200]
