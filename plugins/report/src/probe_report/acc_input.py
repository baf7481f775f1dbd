"""A :class:`~probe_report.model.Report` of what ``probe acc-check`` wrote: ``summary.json`` (counts, the failing
APIs worst first with their standards) and ``accuracy_checking_details_*.csv`` (one row per output checked)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from probe_report.model import Answer, Listing, Report, Table, number, short

DETAIL_COLUMNS = ("API Name", "Status", "Bench Dtype", "Tested Dtype", "Shape", "Cosine", "MaxAbsErr",
                  "MaxRelativeErr", "Standard", "Message")
MAX_TABLE_ROWS = 20_000


def _details(summary: dict[str, Any], folder: Path) -> Path | None:
    """The details CSV summary.json names, or the file of that name in ``folder`` (a moved folder)."""
    named = Path(str(summary.get("details_csv", "")))
    return next((p for p in (named, folder / named.name) if named.name and p.is_file()), None)


def failing_listing(summary: dict[str, Any], ident: str = "failing", title: str = "") -> Listing:
    """acc-check's failing APIs, worst first, each with the standard it misses and why."""
    rows = summary.get("failing") or []
    listing = Listing(ident, title or f"APIs that miss their precision standard ({len(rows)}), worst first",
                      ["API", "status", "forward", "backward", "worst output", "cosine", "max abs err", "max rel err",
                       "standard", "why"], [], [])
    for row in rows:
        listing.rows.append([str(row.get("api", "")), str(row.get("status", "")), str(row.get("forward", "")),
                             str(row.get("backward") or "-"),
                             str(row.get("output", "")).removeprefix(str(row.get("api", "")) + "."),
                             short(number(row.get("cosine")), 7), short(number(row.get("max_abs_err")), 3),
                             short(number(row.get("max_rel_err")), 3), str(row.get("standard", "")),
                             str(row.get("message", ""))])
        listing.results.append(str(row.get("status", "")))
    return listing


def acc_answer(summary: dict[str, Any]) -> Answer:
    rows = summary.get("failing") or []
    apis, errors, warnings = summary.get("apis", 0), summary.get("error", 0), summary.get("warning", 0)
    dump = str(summary.get("dump", "DUMP"))
    if not rows:
        answer = Answer(False, f"All {apis - summary.get('skipped', 0)} APIs checked meet their precision standard")
    else:
        worst = rows[0]
        answer = Answer(True, f"{errors} of {apis} APIs fail their precision standard ({warnings} warn); the worst: "
                              f"{worst['api']} ({worst.get('standard') or 'its standard'})",
                        reason=str(worst.get("message", "")))
        answer.next_steps = [
            ("Re-run the worst API alone and keep its inputs and outputs (OUT/error_data/)",
             f"probe acc-check -api_info {dump} --filter {worst['api']} -save_error_data -o acc_zoom"),
            ("Compare with the pre-check of the benchmark's stack, output by output",
             "probe acc-check compare THIS/accuracy_checking_details_*.csv OTHER/accuracy_checking_details_*.csv "
             "-o acc_cmp")]
    answer.facts = [(k, str(summary.get(k))) for k in ("dump", "framework", "device", "dtype") if summary.get(k)]
    if summary.get("skipped"):
        answer.notes.append("skipped: " + "; ".join(f"{n} x {why}" for why, n in
                                                    (summary.get("skipped_reasons") or {}).items()))
    return answer


def read_acc_check(folder: Path, summary: dict[str, Any], summary_path: Path) -> Report:
    report = Report("acc-check", "probe acc-check", [("dump", str(summary.get("dump", ""))), ("acc-check", str(folder))],
                    acc_answer(summary))
    report.counts = [(k, int(summary.get(k) or 0)) for k in ("pass", "warning", "error", "skipped")]
    if summary.get("failing"):
        report.listings.append(failing_listing(summary))
    details = _details(summary, folder)
    if details is not None:
        report.table = _table(details)
    return report


def _table(path: Path) -> Table:
    """Every output checked, the failing ones first when there are too many to carry."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    table = Table(list(DETAIL_COLUMNS), [], files=[path.resolve().as_uri()], name_column="API Name",
                  result_column="Status")
    chosen = list(enumerate(rows, start=1))
    if len(chosen) > MAX_TABLE_ROWS:
        table.left_out = len(chosen) - MAX_TABLE_ROWS
        chosen = sorted(sorted(chosen, key=lambda c: c[1].get("Status") == "pass")[:MAX_TABLE_ROWS])
    for line, row in chosen:
        table.rows.append([_cell(row.get(c, "")) if c in ("Cosine", "MaxAbsErr", "MaxRelativeErr") else
                           row.get(c, "") for c in DETAIL_COLUMNS])
        table.origins.append((0, line))
    return table


def _cell(text: str) -> str:
    value = number(text)
    return short(value, 6) if value is not None else text
