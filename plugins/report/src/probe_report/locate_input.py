"""A :class:`~probe_report.model.Report` of what ``probe locate`` wrote: ``locate_summary.json`` (every stage's
commands, cost and finding; the answer) and the stages' own outputs, each read by its command's reader: the
curves and heat maps of every stage's compare, the module tree and entries of the last one, stage 4's acc-check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe_core.api import human_size
from probe_report.model import Answer, Listing, Report

#: the stages in order: (name, folder, what it answers), as probe locate writes them
STAGES = (("monitor", "stage1-monitor", "where the runs part"), ("l0", "stage2-l0", "which module"),
          ("mix", "stage3-mix", "which API"), ("replay", "stage4-replay", "why"))


def _cost(state: dict[str, Any]) -> str:
    return (f"{float(state.get('seconds') or 0):.1f} s wall, {float(state.get('cpu_seconds') or 0):.1f} s CPU, "
            f"{human_size(int(state.get('bytes') or 0))}")


def _stages(summary: dict[str, Any]) -> Listing:
    states = summary.get("stages") or {}
    listing = Listing("stages", "Stages: what each ran, found and cost", ["stage", "asks", "ran", "cost", "found"],
                      [], [], note=f"all stages: {_cost(summary)} written")
    for i, (name, folder, asks) in enumerate(STAGES, start=1):
        state = states.get(name)
        if state is None:
            listing.rows.append([f"{i} {name}", asks, "-", "-", "not run"])
            listing.results.append("")
            continue
        finding = state.get("finding") or {}
        listing.rows.append([f"{i} {name} ({folder}/)", asks, "\n".join(state.get("ran") or []) or "-", _cost(state),
                             str(finding.get("found", ""))])
        listing.results.append("error" if finding.get("answer") else "")
    return listing


def _stage_reports(folder: Path) -> list[tuple[str, Report]]:
    """The report of each stage's compare (and stage 4's acc-check), in stage order, where the stage wrote one."""
    from probe_report.inputs import read_output

    found = []
    for i, (name, stage, _) in enumerate(STAGES, start=1):
        out = folder / stage / ("acc" if name == "replay" else "compare")
        if (out / "summary.json").is_file():
            found.append((f"stage {i} {name}", read_output(out)))
    return found


def read_locate(folder: Path, summary: dict[str, Any], summary_path: Path) -> Report:
    parts = _stage_reports(folder)
    compares = [(label, r) for label, r in parts if r.kind != "acc-check"]
    last = compares[-1][1] if compares else None
    report = Report("locate", "probe locate", [("locate", str(folder))], _answer(summary, last))
    report.listings.append(_stages(summary))
    for label, part in parts:
        report.sources.append((label, next((path for what, path in part.sources if what in (part.kind, "compare")),
                                           "")))
        if part.kind == "acc-check":  # the API replayed on the bench's inputs: its failing outputs, if any
            for listing in part.listings:
                listing.ident, listing.title = "replay", f"{label}: {listing.title}"
            report.listings += part.listings
            continue
        for chart in part.charts:
            chart.title = f"{label}: {chart.title}"
        for heat in part.heatmaps:
            heat.title = f"{label}: {heat.title}"
        report.charts += part.charts
        report.heatmaps += part.heatmaps
    if last is not None:
        report.counts, report.tree, report.table = last.counts, last.tree, last.table
        report.tree_title = f"{compares[-1][0]}, {last.tree_title}"
    return report


def _answer(summary: dict[str, Any], last: Report | None) -> Answer:
    """probe locate's verdict first; the last compare's facts, reason and the user's stack under it."""
    verdict = summary.get("answer")
    if verdict is None:
        stopped = summary.get("stopped_after") or "?"
        answer = Answer(False, f"Stopped after stage {stopped}: no answer yet")
        answer.next_steps = [("Go on from there (finished stages are reused)",
                              "rerun the same probe locate command without --stop-after")]
    else:
        kind = str(verdict.get("kind", ""))
        answer = Answer(kind != "agree", f"{kind}: {verdict.get('text', '')}")
        answer.facts = [("verdict", kind)]
    if last is not None and last.answer.found:
        answer.facts += last.answer.facts
        answer.cause, answer.reason = last.answer.cause, last.answer.reason
        answer.stack = last.answer.stack
        answer.notes.append(f"The facts, cause, effect and stack are the last compare's ({last.sources[-1][1]}); the "
                            "sections below are the stages' own.")
    answer.notes.append(f"cost of all stages: {_cost(summary)} written")
    return answer
