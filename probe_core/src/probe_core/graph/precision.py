"""Precision index and colours of compared nodes.

Each matched target node gets a precision index from the compare rules'
verdict for its entry (pass 0, warning 0.5, error 1); the viewer colours it
by ``tb_config.node_colors``: pale for [0, 0.3), orange for [0.3, 0.6), red
for [0.6, 1], grey for unmatched nodes. The verdict itself is the compare
module's (:mod:`probe_core.compare`); this module only adapts graph nodes to
it and keeps the metrics the viewer shows beside each tensor.
"""

from __future__ import annotations

from typing import Any

from probe_core.graph.model import Graph, Node

PASS_INDEX, WARNING_INDEX, ERROR_INDEX = 0.0, 0.5, 1.0
WARNING_AT, ERROR_AT = 0.3, 0.6
INDEX_OF = {"pass": PASS_INDEX, "warning": WARNING_INDEX, "error": ERROR_INDEX}
GREY = "#C7C7C7"
TASK_OF_MODE = {"statistics": "summary", "md5": "md5", "tensor": "all", "structure": "structure"}


def node_colors(mode: str) -> dict[str, Any]:
    """``tb_config.node_colors`` for a compare of ``mode`` dumps (the seeds' legend)."""
    what = {"md5": "CRC-32 of inputs/outputs", "tensor": "tensor error of inputs/outputs"}.get(
        mode, "statistics error of inputs/outputs")
    return {
        "#FFFCF3": {"value": [0, WARNING_AT], "description": f"pass: {what} within tolerance"},
        "#FFDC7F": {"value": [WARNING_AT, ERROR_AT], "description": f"warning: {what} suspicious"},
        "#FF704D": {"value": [ERROR_AT, 1], "description": f"error: {what} out of tolerance"},
        GREY: {"value": [], "description": "unmatched node: no counterpart on the bench side"},
    }


def tool_tips(mode: str) -> dict[str, str]:
    """What the viewer shows when hovering a metric name."""
    if mode == "md5":
        return {"md5": "CRC-32 of the tensor's bytes; equal values mean identical data"}
    if mode == "tensor":
        return {"Cosine": "cosine similarity of target and bench tensors (1 is identical)",
                "MaxAbsErr": "largest absolute element difference",
                "MaxRelativeErr": "largest relative element difference",
                "One Thousandth Err Ratio": "share of elements with relative error below 0.1%",
                "Five Thousandth Err Ratio": "share of elements with relative error below 0.5%"}
    return {f"{stat}{kind}": f"{label} of the {stat} statistic, target vs bench"
            for stat in ("Max", "Min", "Mean", "Norm")
            for kind, label in (("AbsErr", "absolute difference"), ("RelativeErr", "relative difference"))}


def _judge(target: Node, bench: Node, mode: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """(verdict, metrics per tensor key) of one matched pair, by the compare rules."""
    from probe_core.graph.compare_adapter import judge_pair

    return judge_pair(target, bench, mode)


def score_graphs(target: Graph, bench: Graph, mode: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Set ``precision_index`` on matched nodes of both sides; return the target side's metrics."""
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for node in target.nodes.values():
        other = node.matched
        if other is None:
            node.precision_index = None
            continue
        if mode == "structure" or not (node.inputs or node.outputs or other.inputs or other.outputs):
            verdict, found = "pass", {}
        else:
            verdict, found = _judge(node, other, mode)
        node.precision_index = other.precision_index = INDEX_OF.get(verdict, PASS_INDEX)
        if found:
            metrics[node.name] = found
    return metrics
