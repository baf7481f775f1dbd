"""The first NaN/Inf of each step and of the whole job, across ranks, and msprobe's report of it.

Each rank dump is read once (:func:`~probe_overflow_check.scan.scan_rank`); the ranks' first NaN/Infs of
a step are ordered through their communication entries (``probe_core.api.first_across_ranks``). Steps are in
time order, so the job's first NaN/Inf is the first of the earliest step that has one.

The report is msprobe's ``anomaly_analyze_{timestamp}.json``: ``{"rank_{R}": [node, ...]}``, a node
being ``{"op_name", "data_info", "construct_info", "stack_info"}``; it holds the step's first NaN/Inf and
the ones concurrent with it on other ranks (same epoch, nothing orders them), the named one first.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_core.api import concurrent_with, discover, DumpEntry, DumpError, first_across_ranks, write_new, writing

from probe_overflow_check.scan import Finding, RankScan, scan_rank


@dataclass(frozen=True)
class StepResult:
    """One step: every rank's scan, the step's first NaN/Inf and those concurrent with it."""

    step: int | None
    scans: tuple[RankScan, ...]
    first: Finding | None
    concurrent: tuple[Finding, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        return [scan.first for scan in self.scans if scan.first is not None]


def order_step(step: int | None, scans: list[RankScan]) -> StepResult:
    anomalies = [finding.anomaly() for finding in (scan.first for scan in scans) if finding is not None]
    communications = {scan.rank: scan.communications for scan in scans}
    first = first_across_ranks(anomalies, communications)
    if first is None:
        return StepResult(step, tuple(scans), None)
    others = concurrent_with(first, anomalies, communications)
    return StepResult(step, tuple(scans), first.payload, tuple(other.payload for other in others))


def analyze(path: str | Path, *, ranks: list[int] | None = None, steps: list[int] | None = None,
            lenient: bool = False) -> list[StepResult]:
    """Every step under ``path`` (a dump root, step folder, rank folder or dump.json), in step order."""
    dumps = discover(path, ranks=ranks, steps=steps, lenient=lenient)
    by_step: dict[int | None, list[RankScan]] = {}
    for dump in dumps:
        by_step.setdefault(dump.step, []).append(scan_rank(dump, dump.rank if dump.rank is not None else 0))
    scans = [scan for group in by_step.values() for scan in group]
    empty = [scan for scan in scans if scan.entries == 0]
    if len(empty) == len(scans):
        files = ", ".join(str(scan.dump.dump_file) for scan in empty[:3]) + (" ..." if len(empty) > 3 else "")
        raise DumpError(f"{files}: holds no entries, nothing to check; the collection recorded nothing: check "
                        f"config.json's step/rank/scope/list filters and that the model ran, then dump again")
    for scan in empty:
        warnings.warn(f"{scan.dump.dump_file}: holds no entries; rank {scan.rank} is left out of the ordering",
                      _probe_warning(), stacklevel=2)
    return [order_step(step, [scan for scan in group if scan.entries]) for step, group in by_step.items()]


def job_first(results: list[StepResult]) -> StepResult | None:
    """The earliest step that holds a NaN/Inf (``None`` when the dump is clean)."""
    return next((result for result in results if result.first is not None), None)


# -- msprobe's anomaly_analyze_*.json ---------------------------------------------


def _construct_chain(entry: DumpEntry) -> list[str]:
    """The entry and its ancestors from construct.json, outermost first."""
    construct = entry.dump.construct if entry.dump is not None else {}
    chain, seen, node = [entry.name], {entry.name}, construct.get(entry.name)
    while node and node not in seen:
        chain.insert(0, node)
        seen.add(node)
        node = construct.get(node)
    return chain


def node_info(finding: Finding) -> dict[str, Any]:
    """One node of the report, in msprobe's layout."""
    entry, data = finding.entry, finding.entry.data if isinstance(finding.entry.data, dict) else {}
    if entry.parsed.direction == "forward":
        keys = ("input_args", "input_kwargs", "output", "parameters")
        info = {key: data.get(key, {} if key == "input_kwargs" else []) for key in keys
                if key != "parameters" or key in data}
    else:
        info = {key: data[key] for key in data}
    return {"op_name": entry.name, "data_info": info, "construct_info": _construct_chain(entry),
            "stack_info": list(entry.stack)}


def report(result: StepResult) -> dict[str, list[dict[str, Any]]]:
    """``{"rank_{R}": [node]}`` for the step's first NaN/Inf and those concurrent with it."""
    content: dict[str, list[dict[str, Any]]] = {}
    for finding in (result.first, *result.concurrent):
        if finding is not None:
            content.setdefault(f"rank_{finding.rank}", []).append(node_info(finding))
    return content


def write_reports(results: list[StepResult], out: str | Path) -> list[Path]:
    """One ``anomaly_analyze_{timestamp}.json`` per step with a NaN/Inf (``..._step{N}_...`` when the dump
    has several steps), each a new file; none when the dump is clean. ``out`` is a folder
    :func:`probe_core.api.prepare_output_dir` checked."""
    several = len(results) > 1
    written: list[Path] = []
    with writing(f"the reports in {out}", lambda: [str(path) for path in written]):
        for result in results:
            if result.first is None:
                continue
            step = f"step{result.step}_" if several and result.step is not None else ""
            text = json.dumps(report(result), indent=2, ensure_ascii=False) + "\n"
            written.append(write_new(out, f"anomaly_analyze_{step}{time.time_ns()}.json", text))
    return written


def _probe_warning() -> type[Warning]:
    from probe_core.api import ProbeWarning

    return ProbeWarning
