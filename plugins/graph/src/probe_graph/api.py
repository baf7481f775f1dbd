"""The public API of probe-graph: the graph model and its building and merging, for graph mergers and for the
commands that read graphs.

A graph merger imports these names from here (and everything else from ``probe_core.api``) and declares
``probe-graph`` among its dependencies; its tests build graphs with ``build_graph`` and run the registry's
mergers with ``merge_side``. Everything else in ``probe_graph`` is private and may move.

- the model: ``Graph``, ``Node``, ``NodeKind``, ``TensorTable``, ``ROOT_NAME``, ``API_GROUP_PREFIX``;
- building: ``build_graph`` (a graph from a construct/dump pair), ``group_top_level_apis``, ``INPUT_KEYS``;
- merging parallel ranks: ``Layout`` (``--rank-size/--tp/--pp/--vpp/--order``), ``DEFAULT_ORDER``, ``merge_side``
  (the registry's graph mergers, in order).
"""

from __future__ import annotations

from probe_core.api import lazy_surface

_EXPORTS: dict[str, tuple[str, ...]] = {
    "probe_graph.model": ("API_GROUP_PREFIX", "ROOT_NAME", "Graph", "Node", "NodeKind", "TensorTable"),
    "probe_graph.flatten": ("INPUT_KEYS",),
    "probe_graph.build": ("build_graph", "group_top_level_apis"),
    "probe_graph.merge": ("DEFAULT_ORDER", "Layout", "merge_side"),
}

__getattr__, __dir__, __all__, WHERE = lazy_surface(__name__, _EXPORTS)
