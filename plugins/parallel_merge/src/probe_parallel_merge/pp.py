"""Pipeline-parallel merge: stitch the stage graphs, in stage order, into one model graph.

Stage s's layers are renumbered after the layers of the stages before it and
its API call counts continue theirs (:mod:`probe_parallel_merge.rename`).
The model root then holds every stage's forward calls in stage order,
followed by the backward calls last stage first (the order they ran in);
the send/recv calls that only pass activations between stages are dropped
(listed in the root's ``parallel_merge_info``).
"""

from __future__ import annotations

from typing import Any

from probe_core.api import BACKWARD, direction
from probe_graph.api import Graph, Node, NodeKind, group_top_level_apis
from probe_parallel_merge.rename import api_counts, list_indices, rename_graph, shifter

#: Point-to-point calls between pipeline stages: dropped from the stitched graph.
P2P = ("Distributed.send.", "Distributed.recv.", "Distributed.isend.", "Distributed.irecv.",
       "Distributed.batch_isend_irecv.")


def _is_backward(node: Node) -> bool:
    if node.kind == NodeKind.API_GROUP:
        return bool(node.children) and all(direction(c.name) == BACKWARD for c in node.children)
    return direction(node.name) in (BACKWARD, "parameters_grad")


def _regroup(graph: Graph) -> list[str]:
    """Ungroup the stitched root's API groups, drop stage-to-stage send/recv calls, group again.

    Returns the names of the dropped point-to-point calls (they exist only because of the split).
    """
    flat: list[Node] = []
    for child in graph.root.children:
        if child.kind == NodeKind.API_GROUP:
            del graph.nodes[child.name]
            flat.extend(child.children)
        else:
            flat.append(child)
    dropped = [c.name for c in flat if c.name.startswith(P2P)]
    for name in dropped:
        del graph.nodes[name]
    graph.root.children = []
    for child in flat:
        if not child.name.startswith(P2P):
            graph.root.add_child(child)
    group_top_level_apis(graph)
    return dropped


class PipelineParallelMerger:
    """``merge(stage_graphs, layout) -> [graph]``: the stages stitched in order (as is with one stage)."""

    def merge(self, graphs: list[Graph], layout: Any) -> list[Graph]:
        if len(graphs) <= 1:
            return list(graphs)
        merged = graphs[0]
        forward = [c for c in merged.root.children if not _is_backward(c)]
        backward = [c for c in merged.root.children if _is_backward(c)]
        for stage in graphs[1:]:
            layers = {path: max(indices) + 1 for path, indices in list_indices(merged).items()}
            rename_graph(stage, shifter(layers, api_counts(merged)))
            for name, node in stage.nodes.items():
                if node is stage.root:
                    continue
                merged.nodes[name] = node
            children = stage.root.children
            for child in children:
                child.parent = merged.root
            forward += [c for c in children if not _is_backward(c)]
            backward = [c for c in children if _is_backward(c)] + backward
            merged.micro_steps = max(merged.micro_steps, stage.micro_steps)
        merged.root.children = forward + backward
        dropped = _regroup(merged)
        merged.root.merge_info = list(merged.root.merge_info or []) + [f"pp={len(graphs)}"] + (
            [f"dropped stage-to-stage calls: {', '.join(dropped)}"] if dropped else [])
        merged.renumber()
        return [merged]
