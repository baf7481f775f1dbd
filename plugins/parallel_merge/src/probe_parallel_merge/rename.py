"""Rename the nodes of a stage graph so stages can be stitched into one model graph.

Pipeline stages number their layers locally (every stage has ``layers.0``)
and count API calls from 0; in the whole model, stage s's ``layers.i`` is
``layers.{i + layers before it}`` and its ``Functional.linear.k`` follows
the calls of the stages before it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from probe_core.api import is_module, split_module
from probe_graph.api import API_GROUP_PREFIX, Graph, Node, ROOT_NAME

_API = re.compile(r"^(?P<op>.+)\.(?P<count>\d+)\.(?P<way>forward|backward)$")


def list_indices(graph: Graph) -> dict[str, set[int]]:
    """``{container path: layer indices}``: path prefixes followed by a number (``layers`` -> {0, 1})."""
    found: dict[str, set[int]] = defaultdict(set)
    for name in graph.nodes:
        parts = split_module(name)
        if parts is None:
            continue
        segments = parts[1].split(".")
        for i, segment in enumerate(segments):
            if segment.isdigit() and i > 0:
                found[".".join(segments[:i])].add(int(segment))
    return found


def api_counts(graph: Graph) -> dict[str, int]:
    """``{API op: number of calls}`` (max count + 1)."""
    counts: dict[str, int] = {}
    for name in graph.nodes:
        match = _API.match(name)
        if match and not is_module(name):
            counts[match["op"]] = max(counts.get(match["op"], 0), int(match["count"]) + 1)
    return counts


def shifter(layer_offsets: dict[str, int], api_offsets: dict[str, int]) -> Callable[[str], str]:
    """A function renaming one node name by the given layer and API-count offsets."""
    def rename(name: str) -> str:
        if name == ROOT_NAME or name.startswith(API_GROUP_PREFIX):
            return name
        parts = split_module(name)
        if parts is not None:
            head, path, cls, way, count = parts
            segments = path.split(".")
            for i, segment in enumerate(segments):
                offset = layer_offsets.get(".".join(segments[:i])) if i > 0 else None
                if segment.isdigit() and offset:
                    segments[i] = str(int(segment) + offset)
            return f"{head}.{'.'.join(segments)}.{cls}.{way}.{count}"
        match = _API.match(name)
        if match and api_offsets.get(match["op"]):
            return f"{match['op']}.{int(match['count']) + api_offsets[match['op']]}.{match['way']}"
        return name
    return rename


def rename_graph(graph: Graph, rename: Callable[[str], str]) -> None:
    """Apply ``rename`` to every node name and to its tensors' keys, in place."""
    renamed: dict[str, Node] = {}
    for old, node in graph.nodes.items():
        new = rename(old)
        if new != old:
            node.name = new
            node.inputs = {new + key[len(old):] if key.startswith(old) else key: v for key, v in node.inputs.items()}
            node.outputs = {new + key[len(old):] if key.startswith(old) else key: v
                            for key, v in node.outputs.items()}
        renamed[new] = node
    graph.nodes = renamed
