"""The framework-neutral graph: modules/cells as nested nodes, APIs as leaves.

A :class:`Graph` is one rank of one step on one side (target or bench). It
knows nothing of torch or mindspore: it is built from the three dump files
(see :mod:`probe_graph.build`), compared, merged and written to a
``.vis.db`` file.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import Any

ROOT_NAME = "DefaultModel"
API_GROUP_PREFIX = "Apis_Between_Modules"

#: An entry's flattened tensors: ``{"<entry>.input.0": {"type": ..., "Max": ...}, ...}``.
TensorTable = dict[str, dict[str, Any]]


class NodeKind(IntEnum):
    """The node types the viewer knows (the ``node_type`` column)."""

    MODULE = 0
    API = 1
    API_GROUP = 9


class Node:
    """One module/cell call, API call, group of APIs, or the model root."""

    __slots__ = ("name", "kind", "parent", "children", "inputs", "outputs", "stack", "micro_step",
                 "precision_index", "overflow_level", "matched", "merge_info", "order", "entry")

    def __init__(self, name: str, kind: NodeKind) -> None:
        self.name = name
        self.kind = kind
        self.parent: Node | None = None
        self.children: list[Node] = []
        self.inputs: TensorTable = {}
        self.outputs: TensorTable = {}
        self.stack: tuple[str, ...] = ()
        self.micro_step = 0
        self.precision_index: float | None = None
        self.overflow_level: str | None = None
        self.matched: Node | None = None  # the node on the other side, after matching
        self.merge_info: list[Any] | None = None
        self.order = 0  # position in execution order (post-order), set by Graph.renumber()
        self.entry: Any = None  # the raw dump.json entry (None for nodes without data)

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.kind.name})"

    def add_child(self, child: Node) -> None:
        child.parent = self
        self.children.append(child)

    def ancestors(self) -> list[str]:
        """Names from the root down to this node's parent."""
        chain: list[str] = []
        node = self.parent
        while node is not None:
            chain.append(node.name)
            node = node.parent
        chain.reverse()
        return chain

    @property
    def is_leaf(self) -> bool:
        return not self.children


class Graph:
    """One side of one rank and step: nodes by name, under one root."""

    def __init__(self, *, rank: int = 0, step: int = 0, source: str = "NPU", task: str = "",
                 dump_dir: str | None = None) -> None:
        self.root = Node(ROOT_NAME, NodeKind.MODULE)
        self.nodes: dict[str, Node] = {ROOT_NAME: self.root}
        self.rank = rank
        self.step = step
        self.source = source
        self.task = task
        self.dump_dir = dump_dir
        self.micro_steps = 1
        self.mode = ""  # name of the data mode that reads the dump ("" for a graph built in memory)
        self.dump_file: str | None = None  # the dump.json it was read from (tensor files are found from it)
        self.framework = ""  # "pytorch" / "mindspore" as dump.json says ("" when unknown)

    @property
    def graph_id(self) -> str:
        return f"{self.source}_{self.step}_{self.rank}"

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def add(self, node: Node, parent: Node) -> Node:
        parent.add_child(node)
        self.nodes[node.name] = node
        return node

    def walk(self) -> Iterator[Node]:
        """Every node, children before their parent (the viewer's ``node_order``)."""
        return reversed(self._walk_backwards())

    def _walk_backwards(self) -> list[Node]:
        """:meth:`walk`'s nodes, last first: a preorder that takes each node's children from the last."""
        out: list[Node] = []
        stack = [self.root]
        pop, append, extend = stack.pop, out.append, stack.extend
        while stack:
            node = pop()
            append(node)
            extend(node.children)
        return out

    def preorder(self) -> Iterator[Node]:
        """Every node, parents before their children."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def release(self) -> None:
        """Unlink the nodes (parent, children, matched partner) once the graph is written: reference counting
        then frees them at once, not the cyclic collector after a scan of every object alive."""
        for node in self.nodes.values():
            node.parent = node.matched = None
            if node.children:  # a leaf's list is empty already: no new one (most nodes are leaves)
                node.children = []

    def renumber(self) -> int:
        """Set each node's ``order`` to its post-order position; return how many nodes the root reaches."""
        backwards = self._walk_backwards()
        last = len(backwards) - 1
        for index, node in enumerate(backwards):
            node.order = last - index
        return last + 1
