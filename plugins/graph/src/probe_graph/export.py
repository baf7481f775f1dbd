"""``probe graph --file_type json``: write a (merged) graph back as a dump: construct.json, dump.json, stack.json.

msprobe writes a parallel-merge build this way (``{OUT}/step{S}/rank{R}/``) so that the merged model can be
compared or built again like any dump. Each node's entry is its dump.json record with the graph's
(merged) statistics put back in; ``Apis_Between_Modules`` groups are the viewer's and are left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probe_core.api import DEFAULT_TASK, is_params_grad, writing
from probe_graph.api import Graph, INPUT_KEYS, Node, NodeKind, TensorTable


def _refill(value: Any, key: str, table: TensorTable) -> Any:
    """``value`` with each tensor record replaced by ``table``'s record of the same dotted key."""
    if isinstance(value, dict):
        if "type" in value:
            return table.get(key, value)
        return {sub: _refill(item, f"{key}.{sub}", table) for sub, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_refill(item, f"{key}.{i}", table) for i, item in enumerate(value)]
    return value


def node_record(node: Node) -> dict[str, Any] | None:
    """The node's dump.json record, statistics taken from its (merged) input/output tables."""
    entry = node.entry
    if not isinstance(entry, dict):
        return None
    if is_params_grad(node.name):
        return {param: [_refill(grads[0], f"{node.name}.{param}", node.inputs)]
                if isinstance(grads, list) and len(grads) == 1 else _refill(grads, f"{node.name}.{param}", node.inputs)
                for param, grads in entry.items()}
    record = dict(entry)
    for field, label in INPUT_KEYS:
        if field in record:
            record[field] = _refill(record[field], f"{node.name}.{label}", node.inputs)
    if "output" in record:
        record["output"] = _refill(record["output"], f"{node.name}.output", node.outputs)
    return record


def _real_parent(node: Node, root: Node) -> str | None:
    parent = node.parent
    while parent is not None and parent.kind == NodeKind.API_GROUP:
        parent = parent.parent
    return None if parent is None or parent is root else parent.name


def export_dump(graph: Graph, folder: Path) -> Path:
    """Write ``graph`` as construct.json/dump.json/stack.json into ``folder``; returns the folder."""
    construct: dict[str, str | None] = {}
    data: dict[str, Any] = {}
    stacks: dict[tuple[str, ...], list[str]] = {}
    for node in graph.preorder():
        if node is graph.root or node.kind == NodeKind.API_GROUP:
            continue
        construct[node.name] = _real_parent(node, graph.root)
        record = node_record(node)
        if record is not None:
            data[node.name] = record
        if node.stack:
            stacks.setdefault(tuple(node.stack), []).append(node.name)
    header = {"task": graph.task or DEFAULT_TASK, "level": "mix", "framework": graph.framework or "pytorch",
              "dump_data_dir": graph.dump_dir, "data": data}
    stack_json = {str(i): [names, list(lines)] for i, (lines, names) in enumerate(stacks.items())}
    done: list[str] = []
    with writing(f"the merged dump in {folder}", lambda: done):
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in (("dump.json", header), ("construct.json", construct), ("stack.json", stack_json)):
            (folder / name).write_text(json.dumps(value, indent=1), encoding="utf-8")
            done.append(str(folder / name))
    return folder
