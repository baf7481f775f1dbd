"""probe-graph: ``probe graph``, model graphs built from dumps or compared into a ``.vis.db`` for TensorBoard.

The graph model (``Graph``, ``Node``, the entry names, building a graph from a dump and merging parallel
ranks through the graph-merger plugins) is probe-core's, through :mod:`probe_core.api`; this package holds
the command: finding and loading the rank dumps (:mod:`~probe_graph.source`), matching and scoring the two
sides (:mod:`~probe_graph.match`, :mod:`~probe_graph.precision`), overflow marks, the ``.vis.db`` writer
(:mod:`~probe_graph.vis_db`) and the viewer (:mod:`~probe_graph.serve`).
"""
