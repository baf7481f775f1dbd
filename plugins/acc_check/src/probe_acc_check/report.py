"""summary.json and the table of failing APIs, worst first, both read back from the result CSVs.

Reading the files (not the run's memory) makes a resumed run's summary cover
the APIs checked before the interruption too.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from probe_acc_check.errors import AccCheckError
from probe_acc_check.judge import SEVERITY
from probe_acc_check.results import NA, ResultFiles, api_of
from probe_acc_check.standards import ERROR, SKIP, WARNING

TABLE_ROWS = 20


def _number(text: str, default: float) -> float:
    try:
        return float(text) if text not in ("", NA) else default
    except ValueError:
        return default


def _status(row: dict[str, str]) -> str:
    if row["Forward Test Success"] == SKIP:
        return SKIP
    return max((row["Forward Test Success"], row["Backward Test Success"]), key=lambda s: SEVERITY.get(s, 0))


def failing(files: ResultFiles) -> list[dict[str, Any]]:
    """The APIs in error or warning, worst first: errors before warnings, then by the lowest cosine and
    the highest relative error of their outputs."""
    details: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in files.details_rows():
        details[api_of(row["API Name"])].append(row)
    found = []
    for row in files.results():
        status = _status(row)
        if status not in (ERROR, WARNING):
            continue
        rows = [r for r in details[row["API Name"]] if r["Status"] in (ERROR, WARNING)] or details[row["API Name"]]
        worst = min(rows, key=lambda r: (-SEVERITY.get(r["Status"], 0), _number(r["Cosine"], 1.0),
                                         -_number(r["MaxRelativeErr"], 0.0))) if rows else {}
        found.append({"api": row["API Name"], "status": status, "forward": row["Forward Test Success"],
                      "backward": row["Backward Test Success"], "output": worst.get("API Name", ""),
                      "cosine": _number(worst.get("Cosine", NA), 1.0),
                      "max_abs_err": _number(worst.get("MaxAbsErr", NA), 0.0),
                      "max_rel_err": _number(worst.get("MaxRelativeErr", NA), 0.0),
                      "standard": worst.get("Standard", ""), "message": row["Message"]})
    found.sort(key=lambda f: (-SEVERITY[f["status"]], f["cosine"], -f["max_rel_err"]))
    return found


def summarize(files: ResultFiles, run: dict[str, Any]) -> dict[str, Any]:
    """Counts by status, the skipped APIs' reasons, the failing APIs worst first; written to summary.json."""
    results = files.results()
    counts = Counter(_status(row) for row in results)
    summary = {
        **run,
        "result_csv": str(files.result), "details_csv": str(files.details),
        "apis": len(results), "pass": counts.get("pass", 0), "warning": counts.get(WARNING, 0),
        "error": counts.get(ERROR, 0), "skipped": counts.get(SKIP, 0),
        "skipped_reasons": dict(Counter(row["Message"] for row in results if _status(row) == SKIP)),
        "failing": failing(files),
    }
    path = files.folder / "summary.json"
    try:
        path.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    except OSError as exc:
        raise AccCheckError(f"{path}: cannot write ({exc.strerror}); choose a writable folder with -o") from None
    return summary


def print_report(summary: dict[str, Any], console: Any) -> None:
    """One line of counts, then the failing APIs worst first (at most :data:`TABLE_ROWS`)."""
    from rich.markup import escape
    from rich.text import Text

    from probe_core.api import print_table

    console.print(f"[bold]{summary['apis']}[/] APIs: [green]{summary['pass']} pass[/], "
                  f"[yellow]{summary['warning']} warning[/], [red]{summary['error']} error[/], "
                  f"{summary['skipped']} skipped — {escape(str(summary['result_csv']))}", highlight=False)
    rows = summary["failing"]
    if not rows:
        return
    table = [[Text(row["api"], "red" if row["status"] == ERROR else "yellow"), row["forward"], row["backward"] or "-",
              row["output"].removeprefix(row["api"] + "."), f"{row['cosine']:.6f}", f"{row['max_abs_err']:.3g}",
              f"{row['max_rel_err']:.3g}", row["standard"]] for row in rows[:TABLE_ROWS]]
    print_table(console, "APIs that miss their precision standard, worst first",
                ("API", "forward", "backward", "worst output", "cosine", "max abs err", "max rel err", "standard"),
                table)
    if len(rows) > TABLE_ROWS:
        console.print(f"... and {len(rows) - TABLE_ROWS} more in {summary['result_csv']}", markup=False)

