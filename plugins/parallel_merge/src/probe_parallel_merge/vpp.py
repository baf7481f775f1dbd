"""Virtual-pipeline merge: cut each stage graph into its model chunks, in the order they run.

With virtual pipelines every stage holds ``vpp`` model chunks (the model is
a list: module paths start with the chunk index, ``Module.1.module.layers.0``).
Chunk c of stage s holds the layers after chunk c of stage s-1, and the
last stage's chunk c comes before stage 0's chunk c+1. This merger returns
the chunk graphs in that order, every chunk renamed to chunk 0, ready for
the pipeline merger to stitch.
"""

from __future__ import annotations

from typing import Any

from probe_core.api import GraphError, split_module
from probe_graph.api import Graph, Node
from probe_parallel_merge.rename import rename_graph


def _chunk_of(node: Node) -> int | None:
    parts = split_module(node.name)
    if parts is None:
        return None
    first = parts[1].split(".", 1)[0]
    return int(first) if first.isdigit() else None


def _to_chunk_zero(name: str) -> str:
    parts = split_module(name)
    if parts is None:
        return name
    head, path, cls, way, count = parts
    first, _, rest = path.partition(".")
    if not first.isdigit():
        return name
    return f"{head}.{'.'.join(p for p in ('0', rest) if p)}.{cls}.{way}.{count}"


def split_chunks(graph: Graph, vpp: int) -> list[Graph]:
    """The chunk graphs of one stage (top-level APIs go with the chunk that ran before them)."""
    chunks = [Graph(rank=graph.rank, step=graph.step, source=graph.source, task=graph.task,
                    dump_dir=graph.dump_dir) for _ in range(vpp)]
    for chunk in chunks:
        chunk.mode, chunk.dump_file = graph.mode, graph.dump_file
    current = 0
    for child in graph.root.children:
        found = _chunk_of(child)
        if found is not None:
            if found >= vpp:
                raise GraphError(f"rank {graph.rank}: module {child.name} is in model chunk {found} but --vpp "
                                 f"is {vpp}; check --vpp")
            current = found
        target = chunks[current]
        target.root.add_child(child)
        stack = [child]
        while stack:
            node = stack.pop()
            target.nodes[node.name] = node
            stack.extend(node.children)
    for chunk in chunks:
        rename_graph(chunk, _to_chunk_zero)
    return chunks


class VirtualPipelineMerger:
    """``merge(stage_graphs, layout) -> chunk graphs`` in execution order (as is with ``vpp == 1``)."""

    def merge(self, graphs: list[Graph], layout: Any) -> list[Graph]:
        if layout.vpp <= 1:
            return list(graphs)
        per_stage = [split_chunks(graph, layout.vpp) for graph in graphs]
        return [per_stage[stage][chunk] for chunk in range(layout.vpp) for stage in range(len(graphs))]
