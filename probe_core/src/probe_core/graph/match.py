"""Match the nodes of a target graph with a bench graph.

Default: same name under matched parents (so the whole parent chain agrees).
``fuzzy``: within each matched parent, children are paired in call order by
their name without call counts. ``layer_mapping``: module names are compared
by their path with the class name ignored, after renaming path segments with
a YAML map ``{Class: {target_attr: bench_attr}}`` (the class is the parent
module's, target side); APIs still match by name under matched modules.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from probe_core.errors import GraphError
from probe_core.graph.model import Graph, Node
from probe_core.graph.names import split_module, without_count

LayerMap = Mapping[str, Mapping[str, str]]
KeyFn = Callable[[Node, bool], Any]


def load_layer_mapping(path: str | Path) -> dict[str, dict[str, str]]:
    """Read a layer-mapping YAML: ``{Class: {target_name: bench_name}}``."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GraphError(f"{path}: cannot read the layer mapping ({exc.strerror}); check --layer-mapping") from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # bad YAML, not UTF-8, a 5,000-digit int, too deep
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:160]
        raise GraphError(f"{path}: not valid YAML ({reason}); fix the layer mapping file") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise GraphError(f"{path}: expected 'Class: {{target_name: bench_name}}' mappings at the top level, "
                         f"e.g. 'ParallelTransformerLayer: {{input_norm: input_layernorm}}'")
    return {str(cls): {str(k): str(v) for k, v in names.items()} for cls, names in data.items()}


def _mapped_paths(graph: Graph, mapping: LayerMap) -> dict[str, str]:
    """``{module node: its path with mapped segments}`` for the target graph (top-down)."""
    paths: dict[str, str] = {}
    for node in graph.preorder():
        parts = split_module(node.name)
        if parts is None:
            continue
        _, path, _, _, _ = parts
        parent = node.parent
        parent_parts = split_module(parent.name) if parent is not None else None
        if parent_parts is not None and path.startswith(parent_parts[1] + "."):
            base = paths.get(parent.name, parent_parts[1])
            segment = path[len(parent_parts[1]) + 1:]
            segment = mapping.get(parent_parts[2], {}).get(segment, segment)
            paths[node.name] = f"{base}.{segment}"
        else:
            head, _, last = path.rpartition(".")
            top = mapping.get("", {}) if parent_parts is None else {}
            paths[node.name] = f"{head}.{top.get(last, last)}" if head else top.get(last, last)
    return paths


def _exact_key(node: Node, _: bool) -> Any:
    return node.name


def _layer_key(paths: dict[str, str]) -> KeyFn:
    def key(node: Node, is_target: bool) -> Any:
        parts = split_module(node.name)
        if parts is None:
            return node.name
        head, path, _, way, count = parts
        return (head, paths.get(node.name, path) if is_target else path, way, count)
    return key


def _pair_children(target: Node, bench: Node, key: KeyFn, fuzzy: bool, pairs: list[tuple[Node, Node]]) -> None:
    if fuzzy:
        queues: dict[Any, list[Node]] = defaultdict(list)
        for child in bench.children:
            queues[without_count(child.name)].append(child)
        for child in target.children:
            queue = queues.get(without_count(child.name))
            if queue:
                pairs.append((child, queue.pop(0)))
        return
    by_key = {key(child, False): child for child in bench.children}
    for child in target.children:
        other = by_key.get(key(child, True))
        if other is not None:
            pairs.append((child, other))


def match_graphs(target: Graph, bench: Graph, *, fuzzy: bool = False,
                 layer_mapping: LayerMap | bool | None = None) -> int:
    """Link matched nodes (``node.matched`` on both sides); return the number of matched target nodes."""
    for graph in (target, bench):
        for node in graph.nodes.values():
            node.matched = None
    key: KeyFn = _exact_key
    if layer_mapping is not None and layer_mapping is not False:
        key = _layer_key(_mapped_paths(target, layer_mapping if isinstance(layer_mapping, Mapping) else {}))
    pending = [(target.root, bench.root)]
    matched = 0
    while pending:
        node, other = pending.pop()
        node.matched, other.matched = other, node
        matched += 1
        pairs: list[tuple[Node, Node]] = []
        _pair_children(node, other, key, fuzzy, pairs)
        pending.extend(pairs)
    return matched
