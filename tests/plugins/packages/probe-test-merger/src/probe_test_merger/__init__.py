"""A graph merger that changes nothing and records each call (plugin ``merge_audit``).

Registered with priority 5, so ``audit`` runs after the built-in ``tp``
(priority 0) and before ``vpp`` (10) and ``pp`` (20). Each call appends
one JSON line to the file named by ``MERGE_AUDIT_LOG``: how many graphs it
got, their ranks, whether tp had merged them, whether pp had stitched them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from probe_core.api import GraphMergerSpec, hookimpl



class AuditMerger:
    def merge(self, graphs: list[Any], layout: Any) -> list[Any]:
        log = os.environ.get("MERGE_AUDIT_LOG")
        if log:
            record = {
                "graphs": len(graphs),
                "ranks": [graph.rank for graph in graphs],
                "layout": {"tp": layout.tp, "pp": layout.pp, "vpp": layout.vpp},
                "tp_merged": [any(str(note).startswith("tp=") for node in graph.nodes.values()
                                  for note in (node.merge_info or ())) for graph in graphs],
                "pp_stitched": [bool(graph.root.merge_info) for graph in graphs],
            }
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        return graphs


@hookimpl
def probe_graph_mergers() -> list[GraphMergerSpec]:
    return [GraphMergerSpec("audit", "records what it is called with; changes nothing", AuditMerger, priority=5)]
