"""Tensor-parallel merge: one graph from the graphs of a tensor-parallel group.

Every node keeps its name; each tensor of each node is looked at across the
ranks: replicated tensors (same shape and statistics everywhere) stay as
they are; sharded ones get the whole tensor's statistics
(:func:`~probe_parallel_merge.shards.merge_shards`), split along dim 0 for
the parameters of a column-parallel module (its output is sharded) and the
last dim otherwise. Partial sums (the input of a ``Distributed.all_reduce``
and the tensors with the same numbers) are not shards: they are shown as the
reduced result (the collective's recorded output, else the enclosing
module's output of that shape) when there is one. Each touched node's ``parallel_merge_info`` says what was done.
"""

from __future__ import annotations

from typing import Any

from probe_core.api import BACKWARD, FORWARD, GraphError, counterpart, is_params_grad
from probe_graph.api import Graph, Node, NodeKind
from probe_parallel_merge.shards import is_tensor, merge_shards, same, signature

REDUCES = ("Distributed.all_reduce.", "Distributed.reduce.")


def _first_output(node: Node | None) -> dict | None:
    if node is None:
        return None
    return next((v for v in node.outputs.values() if is_tensor(v)), None)


def _partials(graph: Graph) -> dict[tuple, dict | None]:
    """``{signature of a partial sum: the reduced tensor (or None)}`` for one rank's graph."""
    found: dict[tuple, dict | None] = {}
    for name, node in graph.nodes.items():
        if not name.startswith(REDUCES):
            continue
        partial = next((v for v in node.inputs.values() if is_tensor(v)), None)
        if partial is None:
            continue
        own = _first_output(node)  # collectors that record the collective's result
        reduced = own if own is not None and list(own.get("shape") or ()) == list(partial.get("shape") or ()) else None
        parent = node.parent
        while parent is not None and reduced is None:
            out = _first_output(parent)
            if out is not None and list(out.get("shape") or ()) == list(partial.get("shape") or ()):
                reduced = out
            parent = parent.parent
        found[signature(partial)] = reduced
    return found


def _sharded_outputs(graphs: list[Graph], partials: dict[tuple, dict | None]) -> dict[str, bool]:
    """``{forward node: its output is split across ranks}`` (a column-parallel call's is; partial sums are not)."""
    sharded: dict[str, bool] = {}
    for name, node in graphs[0].nodes.items():
        if f".{FORWARD}" in name:
            outs = [_first_output(node)] + [_first_output(g.nodes[name]) for g in graphs[1:]]
            sharded[name] = (all(o is not None for o in outs) and not same(outs)  # type: ignore[arg-type]
                             and signature(outs[0]) not in partials)  # type: ignore[arg-type]
    return sharded


def _column_parallel(name: str, sharded: dict[str, bool]) -> bool:
    """Does this node's module split its weight by rows (dim 0)? Backward/grad nodes ask their forward call."""
    if is_params_grad(name) or f".{BACKWARD}" in name:
        return sharded.get(counterpart(name, FORWARD) or "", False)
    return sharded.get(name, False)


def _merge_table(nodes: list[Node], attr: str, column: bool, partials: dict, notes: list[str]) -> None:
    base_table = getattr(nodes[0], attr)
    for key, value in base_table.items():
        if not is_tensor(value):
            continue
        values = [getattr(n, attr).get(key) for n in nodes]
        if any(v is None or not is_tensor(v) for v in values) or same(values):
            continue
        sig = signature(value)
        if sig in partials:
            reduced = partials[sig]
            if reduced is not None:
                value.update({k: reduced[k] for k in ("Max", "Min", "Mean", "Norm", "shape") if k in reduced})
                notes.append(f"{key[len(nodes[0].name) + 1:]}: partial sums, shown reduced")
            else:
                notes.append(f"{key[len(nodes[0].name) + 1:]}: partial sums on rank 0 (no reduced result found)")
            continue
        name = nodes[0].name
        api_weight = nodes[0].kind == NodeKind.API and ".input." in key and not key.endswith(".input.0")
        parameter = ".parameters." in key or is_params_grad(name) or api_weight
        dim = 0 if parameter and column else -1
        value.update(merge_shards(values, dim))
        notes.append(f"{key[len(nodes[0].name) + 1:]}: {len(values)} shards merged along dim {dim}")


class TensorParallelMerger:
    """``merge(graphs, layout) -> stage graphs``: each run of ``layout.tp`` graphs (one stage, in tp order)
    becomes one graph; with ``tp == 1`` there is nothing to merge."""

    def merge(self, graphs: list[Graph], layout: Any) -> list[Graph]:
        if layout.tp <= 1:
            return list(graphs)
        return [self.merge_stage(graphs[i:i + layout.tp]) for i in range(0, len(graphs), layout.tp)]

    def merge_stage(self, graphs: list[Graph]) -> Graph:
        """Merge one stage's tensor-parallel graphs into the first of them."""
        base = graphs[0]
        missing = [name for g in graphs[1:] for name in base.nodes if name not in g.nodes]
        if missing:
            raise GraphError(f"tensor-parallel ranks have different graphs (rank {graphs[1].rank} lacks "
                             f"{missing[0]}); check --tp and --order against the training script")
        partials: dict[tuple, dict | None] = {}
        for graph in graphs:
            partials.update(_partials(graph))
        sharded = _sharded_outputs(graphs, partials)
        for name, node in base.nodes.items():
            nodes = [node] + [g.nodes[name] for g in graphs[1:]]
            column = _column_parallel(name, sharded)
            notes: list[str] = []
            _merge_table(nodes, "inputs", column, partials, notes)
            _merge_table(nodes, "outputs", column, partials, notes)
            if notes:
                node.merge_info = [f"tp={len(graphs)}"] + notes
        return base
