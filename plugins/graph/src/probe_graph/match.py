"""Match the nodes of a target graph with a bench graph.

Default: same name under matched parents (so the whole parent chain agrees).
``fuzzy``: within each matched parent, children are paired in call order by
their name without call counts. ``layer_mapping``: module names are compared
by their path with the class name and the ``Cell``/``Module`` head ignored,
after renaming path segments with a YAML map ``{Class: {target_attr:
bench_attr}}`` (the class is the parent module's, target side); APIs under
matched modules pair in call order by their name, mapped through the built-in
MindSpore->PyTorch table when the two dumps' frameworks differ, then by op
name alone (``Mint.mean`` with ``Tensor.mean``).

In every mode the ``Apis_Between_Modules`` groups are the viewer's, not the dump's: the calls in them pair as if
they sat directly under the parent, so a call one side grouped (with top-level calls only the other side made:
the bench's gradient clipping before ``optimizer``) still finds its partner, as ``probe compare`` pairs it. A group
then pairs with the other side's group that holds the partner of its first paired call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from probe_compare.api import NameMap, builtin_map
from probe_core.api import GraphError, split_module, without_count
from probe_graph.api import Graph, Node, NodeKind

LayerMap = Mapping[str, Mapping[str, str]]
KeyFn = Callable[[Node, bool], Any]


def load_layer_mapping(path: str | Path) -> dict[str, dict[str, str]]:
    """Read a layer-mapping YAML: ``{Class: {target_name: bench_name}}``."""
    from probe_core.api import load_yaml

    data = load_yaml(path, flag="--layer-mapping", error=GraphError,
                     hint="a layer mapping is 'Class: {target_name: bench_name}'")
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
    """Modules by mapped path, direction and count: class and ``Cell``/``Module`` head ignored."""
    def key(node: Node, is_target: bool) -> Any:
        parts = split_module(node.name)
        if parts is None:
            return node.name
        _, path, _, way, count = parts
        return (paths.get(node.name, path) if is_target else path, way, count)
    return key


def _api_keys(name_map: NameMap | None) -> tuple[Callable[[Node, bool], Any], Callable[[Node], Any]]:
    """(by mapped API name, by op name alone) keys of an API node, direction included, counts left out."""
    def mapped(node: Node, is_target: bool) -> Any:
        base, _, way = without_count(node.name).rpartition(".")
        return (name_map.api_base(base) if is_target and name_map is not None else base), way

    def op_only(node: Node) -> Any:
        base, _, way = without_count(node.name).rpartition(".")
        return base.partition(".")[2], way
    return mapped, op_only


def _pair_in_order(targets: list[Node], benches: list[Node], key_t: Callable[[Node], Any],
                   key_b: Callable[[Node], Any], pairs: list[tuple[Node, Node]]) -> tuple[list[Node], list[Node]]:
    """Pair nodes of equal key in call order; return the unpaired of both sides."""
    queues: dict[Any, list[Node]] = defaultdict(list)
    for node in benches:
        queues[key_b(node)].append(node)
    left: list[Node] = []
    for node in targets:
        queue = queues.get(key_t(node))
        if queue:
            pairs.append((node, queue.pop(0)))
        else:
            left.append(node)
    taken = {id(b) for _, b in pairs}
    return left, [b for b in benches if id(b) not in taken]


def _ungrouped(children: list[Node]) -> list[Node]:
    """``children`` with each ``Apis_Between_Modules`` group replaced by the calls in it (call order kept)."""
    out: list[Node] = []
    for child in children:
        if child.kind == NodeKind.API_GROUP:
            out.extend(child.children)
        else:
            out.append(child)
    return out


def _pair_groups(target: Node, pairs: list[tuple[Node, Node]]) -> None:
    """Pair each target group with the bench group that holds the partner of its first paired call."""
    partner = {id(t): b for t, b in pairs}
    taken: set[int] = set()
    for group in (child for child in target.children if child.kind == NodeKind.API_GROUP):
        other = next((partner[id(c)].parent for c in group.children if id(c) in partner), None)
        if other is not None and other.kind == NodeKind.API_GROUP and id(other) not in taken:
            taken.add(id(other))
            pairs.append((group, other))


def _pair_children(target: Node, bench: Node, key: KeyFn, fuzzy: bool, pairs: list[tuple[Node, Node]],
                   name_map: NameMap | None = None, by_layer: bool = False) -> None:
    if not (target.children and bench.children):  # a leaf on either side: most nodes
        return
    found: list[tuple[Node, Node]] = []
    _pair_calls(_ungrouped(target.children), _ungrouped(bench.children), key, fuzzy, found, name_map, by_layer)
    _pair_groups(target, found)
    pairs.extend(found)


def _pair_calls(targets: list[Node], benches: list[Node], key: KeyFn, fuzzy: bool, pairs: list[tuple[Node, Node]],
                name_map: NameMap | None, by_layer: bool) -> None:
    if fuzzy:
        _pair_in_order(targets, benches, without_count_of, without_count_of, pairs)
        return
    is_api = lambda node: node.kind == NodeKind.API  # noqa: E731
    if key is _exact_key and not by_layer:  # by name: the default
        by_name = {child.name: child for child in benches}
        pairs.extend((child, by_name[child.name]) for child in targets if child.name in by_name)
        return
    others = [child for child in benches if not (by_layer and is_api(child))]
    by_key = {key(child, False): child for child in others}
    for child in targets:
        if by_layer and is_api(child):
            continue
        other = by_key.get(key(child, True))
        if other is not None:
            pairs.append((child, other))
    if by_layer:  # APIs under matched modules: by mapped name in call order, then by op name (Mint.mean ~ Tensor.mean)
        mapped, op_only = _api_keys(name_map)
        left_t, left_b = _pair_in_order([c for c in targets if is_api(c)], [c for c in benches if is_api(c)],
                                        lambda n: mapped(n, True), lambda n: mapped(n, False), pairs)
        _pair_in_order(left_t, left_b, op_only, op_only, pairs)


def without_count_of(node: Node) -> str:
    return without_count(node.name)


def match_graphs(target: Graph, bench: Graph, *, fuzzy: bool = False,
                 layer_mapping: LayerMap | bool | None = None, registry: Any = None) -> int:
    """Link matched nodes (``node.matched`` on both sides); return the number of matched target nodes.

    With ``layer_mapping`` the graphs may come from two frameworks: modules match by path (class and
    ``Cell``/``Module`` ignored), APIs under matched modules by their name through the built-in
    name table the installed plugins register for the two frameworks (``registry``'s), in call order.
    """
    for graph in (target, bench):
        for node in graph.nodes.values():
            node.matched = None
    key: KeyFn = _exact_key
    by_layer = layer_mapping is not None and layer_mapping is not False
    name_map = None
    if by_layer:
        key = _layer_key(_mapped_paths(target, layer_mapping if isinstance(layer_mapping, Mapping) else {}))
        name_map = builtin_map(target.framework, bench.framework, registry)
    pending = [(target.root, bench.root)]
    matched = 0
    while pending:
        node, other = pending.pop()
        node.matched, other.matched = other, node
        matched += 1
        pairs: list[tuple[Node, Node]] = []
        _pair_children(node, other, key, fuzzy, pairs, name_map, by_layer)
        pending.extend(pairs)
    return matched
