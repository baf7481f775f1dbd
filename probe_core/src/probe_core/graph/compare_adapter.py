"""Thin adapter from graph nodes to the compare rules of :mod:`probe_core.compare`.

The verdict (pass / warning / error) and the statistics metrics are the
compare module's; this module only pairs the two nodes' leaves by their
argument position (``.input.0``, ``.output.1``, ...: names may differ when
nodes were matched fuzzily or by layer mapping) and renames the metrics to
the columns the viewer shows (``MaxAbsErr``, ``NormRelativeErr`` as percent).
Tensor-mode dumps are judged on their statistics here (the graph does not
load tensor files).
"""

from __future__ import annotations

import math
from typing import Any

from probe_core.compare.metrics import DIFF_COLUMNS, RELATIVE_COLUMNS, statistics_metrics
from probe_core.compare.rules import RowResult, judge_entry
from probe_core.dump.leaves import TensorMeta, iter_leaves
from probe_core.graph.model import Node

SHOWN_DIFF = dict(zip(DIFF_COLUMNS, ("MaxAbsErr", "MinAbsErr", "MeanAbsErr", "NormAbsErr")))


def _leaves(node: Node) -> dict[str, TensorMeta]:
    if not isinstance(node.entry, dict):
        return {}
    cut = len(node.name)
    return {leaf.name[cut:]: leaf for leaf in iter_leaves(node.name, node.entry)}


def _shown(metrics: dict[str, Any]) -> dict[str, str]:
    """The metrics as the viewer shows them: text, diffs renamed, relative errors in percent."""
    shown: dict[str, str] = {}
    for column, value in metrics.items():
        if column in SHOWN_DIFF:
            shown[SHOWN_DIFF[column]] = str(value)
        elif column in RELATIVE_COLUMNS and value.__class__ is float and math.isfinite(value):
            shown[column] = f"{value * 100:.6g}%"
        else:
            shown[column] = "null" if value is None else str(value)
    return shown


def judge_pair(target: Node, bench: Node, mode: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """(verdict, ``{target tensor key: shown metrics}``) for one matched pair of nodes."""
    rule_mode = "md5" if mode == "md5" else "statistics"
    ours, theirs = _leaves(target), _leaves(bench)
    rows: list[RowResult] = []
    shown: dict[str, dict[str, Any]] = {}
    for suffix in list(ours) + [s for s in theirs if s not in ours]:
        npu, ref = ours.get(suffix), theirs.get(suffix)
        metrics: dict[str, Any] = {}
        if npu is not None and ref is not None and npu.is_tensor and ref.is_tensor and rule_mode == "statistics":
            metrics = statistics_metrics(npu, ref)
        rows.append(RowResult(npu, ref, metrics))
        if npu is not None and metrics:
            shown[target.name + suffix] = _shown(metrics)
    verdict = judge_entry(target.name, rows, rule_mode)
    for row in rows:
        if row.npu is not None and row.messages:
            shown.setdefault(row.npu.name, {})["Result"] = str(row.result)
    return verdict, shown
