"""Build a :class:`~probe_graph.model.Graph` from one rank's construct, dump and stack data.

The hierarchy comes from construct.json (``{child: parent or null}``); entries
only dump.json has (``parameters_grad``) hang under their module's backward
node. A backward node whose parent is null mirrors its forward call's parent
(``Block.forward.0`` -> ``Block.backward.0``). Runs of two or more top-level
APIs between modules are grouped under an ``Apis_Between_Modules.{k}`` node.
Each node carries its flattened inputs/outputs and its call stack (a backward
node without one borrows its forward call's); top-level calls are cut into
micro-steps, one per forward+backward of the first layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe_core.api import BACKWARD, FORWARD, GraphError, counterpart, direction, is_params_grad, without_count
from probe_graph.flatten import flatten_entry
from probe_graph.model import API_GROUP_PREFIX, Graph, Node, NodeKind

_MODULE_PREFIXES = ("Module.", "Cell.")  # what is_module(name) looks for, inline
_PARAMS_GRAD_PART = ".parameters_grad."  # what is_params_grad(name) looks for, inline


def _parent_of(name: str, construct: Mapping[str, Any], known: set[str] | dict) -> str | None:
    parent = construct.get(name)
    if is_params_grad(name):
        owner = counterpart(name, BACKWARD)
        return owner if owner in known else parent
    if parent is None and direction(name) == BACKWARD:
        forward_parent = construct.get(counterpart(name, FORWARD) or "")
        mirrored = counterpart(forward_parent, BACKWARD) if forward_parent else None
        if mirrored in known:
            return mirrored
    return parent


def group_top_level_apis(graph: Graph) -> None:
    """Put runs of two or more API calls directly under the root into Apis_Between_Modules groups."""
    grouped: list[Node] = []
    run: list[Node] = []
    groups = 0

    def flush() -> None:
        nonlocal groups
        if len(run) >= 2:
            group = Node(f"{API_GROUP_PREFIX}.{groups}", NodeKind.API_GROUP)
            groups += 1
            group.parent = graph.root
            for api in run:
                group.add_child(api)
            graph.nodes[group.name] = group
            grouped.append(group)
        else:
            grouped.extend(run)
        run.clear()

    for child in graph.root.children:
        if child.kind == NodeKind.API:
            run.append(child)
            continue
        flush()
        grouped.append(child)
    flush()
    graph.root.children = grouped


def _assign_micro_steps(graph: Graph) -> None:
    children = graph.root.children
    first = next((c for c in children if c.kind == NodeKind.MODULE and direction(c.name) == FORWARD), None)
    base = without_count(first.name) if first else None
    micro_step, seen_backward = 0, False
    for child in children:
        if base and without_count(child.name) == base and seen_backward:
            micro_step += 1
            seen_backward = False
        if direction(child.name) == BACKWARD or (child.kind == NodeKind.API_GROUP and any(
                direction(c.name) == BACKWARD for c in child.children)):
            seen_backward = True
        if micro_step:
            stack = [child]
            while stack:
                node = stack.pop()
                node.micro_step = micro_step
                stack.extend(node.children)
    graph.micro_steps = micro_step + 1


def build_graph(construct: Mapping[str, Any], data: Mapping[str, Any],
                stacks: Mapping[str, tuple[str, ...]] | None = None,
                *, rank: int = 0, step: int = 0, source: str = "NPU", task: str = "",
                dump_dir: str | None = None, where: str = "") -> Graph:
    """The graph of one rank.

    ``construct``: ``{node: parent or None}``; ``data``: dump.json's entries
    (``{name: entry}``, in execution order); ``stacks``: ``{entry: stack lines}``.
    """
    bad = None
    if not set(map(type, construct)) <= {str} or not set(map(type, construct.values())) <= {str, type(None)}:
        bad = next(((node, parent) for node, parent in construct.items()
                    if not isinstance(node, str) or (parent is not None and not isinstance(parent, str))), None)
    if bad is not None:
        raise GraphError(f"{where or 'construct.json'}: key {bad[0]!r}: the parent is {bad[1]!r}, not a node name or "
                         "null; regenerate the dump")
    graph = Graph(rank=rank, step=step, source=source, task=task, dump_dir=dump_dir)
    order: dict[str, None] = dict.fromkeys(construct)
    for name in data:
        order.setdefault(name, None)
    for parent in list(construct.values()):
        if parent is not None and parent not in order:
            order[parent] = None
    order.pop(graph.root.name, None)
    nodes = graph.nodes
    module, api = NodeKind.MODULE, NodeKind.API
    for name in order:
        nodes[name] = Node(name, module if name.startswith(_MODULE_PREFIXES) else api)  # is_module(name), inline
    root, parent_in_construct, node_of = graph.root, construct.get, nodes.get
    for name in order:
        parent = parent_in_construct(name)
        if parent is None or _PARAMS_GRAD_PART in name:  # is_params_grad(name); else as construct.json says: most
            parent = _parent_of(name, construct, nodes)
        child, above = nodes[name], node_of(parent, root)  # type: ignore[arg-type]
        child.parent = above  # above.add_child(child), inline
        above.children.append(child)
    group_top_level_apis(graph)

    for name, entry in data.items():
        node = nodes.get(name)
        if node is not None:
            node.entry = entry
            node.inputs, node.outputs = flatten_entry(name, entry)
    lines = stacks or {}
    for name, node in nodes.items():
        found = lines.get(name)
        if found is None and BACKWARD in name and direction(name) == BACKWARD:  # the first test: most fail it
            found = lines.get(counterpart(name, FORWARD) or "")
        if found:
            node.stack = found
    _assign_micro_steps(graph)
    reached = graph.renumber()
    if reached != len(nodes):
        raise GraphError(f"{where or 'construct.json'}: the parent links form a cycle ({len(nodes) - reached} "
                         "nodes never reach the model root); regenerate the dump")
    return graph
