"""``probe acc-check compare A.csv B.csv``: two pre-check results, output by output (msprobe's api_precision_compare).

A is the device under scrutiny (e.g. an NPU), B a device trusted for the same
APIs (e.g. a GPU); both were checked against a CPU float64 benchmark, so B's
errors say what is achievable. Outputs judged by an absolute standard
(binary consistency, absolute threshold, accumulative error, thousandth) keep A's verdict; ULP
outputs pass when A passed on its own or A's share of outputs off by more
than the ULP threshold is not above B's; every other output is judged by the
ratios A/B of its small-value error share, RMSE, maximum and mean relative
error: at most 1 pass, up to 2 (10 for the maximum relative error) warning,
above that error. The error balance ratio is shown, not judged.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from probe_acc_check.errors import AccCheckError
from probe_acc_check.judge import SEVERITY, worst
from probe_core.api import writing

from probe_acc_check.results import NA, RESULT_COLUMNS, RESULT_NAME, ResultFiles, api_of, claim_files, csv_text, fmt
from probe_acc_check.standards import ERROR, PASS, SKIP, WARNING

#: (details column, warning bound, whether it decides the verdict)
RATIOS = (("Small Value Err Ratio", 2.0, True), ("RMSE", 2.0, True), ("MaxRelativeErr", 10.0, True),
          ("MeanRelativeErr", 2.0, True), ("EB", 2.0, False))
ABSOLUTE = ("binary_consistency", "summed_gradient", "absolute_threshold", "accumulative_error", "thousandth")
COMPARE_COLUMNS = (("API Name",) + tuple(c for name, _, _ in RATIOS for c in (f"{name} (A/B)", f"{name} Status"))
                   + ("ULP Err Ratio A", "ULP Err Ratio B", "Standard", "Status", "Message"))


def _details(path: str | Path) -> dict[str, dict[str, str]]:
    """The details rows of a pre-check, by output name (a result CSV names its details file)."""
    path = Path(path)
    match = RESULT_NAME.match(path.name)
    if match:
        path = path.with_name(f"accuracy_checking_details_{match.group(1)}.csv")
    if not path.is_file():
        raise AccCheckError(f"{path}: no such file; give the accuracy_checking_details_{{timestamp}}.csv (or "
                            f"_result_) of each pre-check")
    return {row["API Name"]: row for row in ResultFiles(path, path).details_rows()}


def _value(row: dict[str, str], column: str) -> float | None:
    try:
        return abs(float(row.get(column, NA)))
    except ValueError:  # N/A, empty
        return None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def _grade(ratio: float | None, warn: float) -> str:
    if ratio is None:
        return ""
    return PASS if ratio <= 1 else WARNING if ratio <= warn else ERROR


def compare_row(name: str, a: dict[str, str] | None, b: dict[str, str] | None) -> list[str]:
    """One output's compare row (see :data:`COMPARE_COLUMNS`)."""
    blank = [""] * (2 * len(RATIOS))
    if a is None or b is None:
        return [name, *blank, "", "", "", SKIP, f"only in {'B' if a is None else 'A'}"]
    standard = a["Standard"]
    ulp = [a.get("ULP Err Ratio", NA), b.get("ULP Err Ratio", NA)]
    if SKIP in (a["Status"], b["Status"]):
        return [name, *blank, *ulp, standard, SKIP, "skipped in A or B: " + (a["Message"] or b["Message"])]
    if standard in ABSOLUTE:
        return [name, *blank, *ulp, standard, a["Status"], f"{standard}: A's own verdict; {a['Message']}".rstrip("; ")]
    if standard == "ulp":
        ratio_a, ratio_b = _value(a, "ULP Err Ratio") or 0.0, _value(b, "ULP Err Ratio") or 0.0
        status = PASS if a["Status"] == PASS or ratio_a <= ratio_b else ERROR
        message = "" if status == PASS else (f"ULP: A has {ratio_a:.3%} of the elements above the threshold, "
                                             f"B {ratio_b:.3%}")
        return [name, *blank, *ulp, standard, status, message]
    cells, statuses, notes = [], [], []
    for column, warn, decides in RATIOS:
        ratio = _ratio(_value(a, column), _value(b, column))
        grade = _grade(ratio, warn)
        cells += [fmt(ratio), grade]
        if decides and grade:
            statuses.append(grade)
            if grade != PASS:
                notes.append(f"{column} A/B = {fmt(ratio)}")
    return [name, *cells, *ulp, "benchmark", worst(statuses) if statuses else PASS, "; ".join(notes)]


def compare_results(a_path: str | Path, b_path: str | Path, out: str | Path) -> dict[str, Any]:
    """Write ``api_precision_compare_{result,details}_{timestamp}.csv`` into ``out``; return counts and paths."""
    a, b = _details(a_path), _details(b_path)
    names = list(a) + [name for name in b if name not in a]
    rows = [compare_row(name, a.get(name), b.get(name)) for name in names]
    apis: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        direction = "backward" if ".backward." in row[0] else "forward"
        apis.setdefault(api_of(row[0]), {"forward": [], "backward": [], "messages": []})[direction].append(row[-2])
        if row[-2] in (ERROR, WARNING):
            apis[api_of(row[0])]["messages"].append(f"{row[0]}: {row[-1]}")
    results = [[api, worst(parts["forward"]) if parts["forward"] else "",
                worst(parts["backward"]) if parts["backward"] else "", "; ".join(parts["messages"][:1])]
               for api, parts in apis.items()]
    details_path, result_path = claim_files(out, "api_precision_compare", {"details": COMPARE_COLUMNS,
                                                                           "result": RESULT_COLUMNS})
    with writing(f"the compare results in {result_path.parent}"):
        for path, body in ((details_path, rows), (result_path, results)):
            with open(path, "a", encoding="utf-8", newline="") as handle:
                handle.write(csv_text(body))
    statuses = [max((f, bw), key=SEVERITY.__getitem__) for _, f, bw, _ in results]
    return {"result_csv": str(result_path), "details_csv": str(details_path), "apis": len(results),
            **{status: statuses.count(status) for status in (PASS, WARNING, ERROR, SKIP)},
            "failing": [r[0] for r, s in zip(results, statuses) if s in (ERROR, WARNING)]}

