"""Merge per-rank graphs into whole-model graphs under a parallel layout, through graph-merger plugins.

A :class:`Layout` (``--rank-size --tp --pp --vpp --order``) places each rank
on the (tp, dp, pp) grid; every data-parallel group becomes one job whose
ranks are merged (``probe graph`` groups them: :func:`probe_graph.jobs.group_jobs`
of probe-graph). The merging itself is the plugins' (``probe_graph_mergers``,
e.g. probe-parallel-merge's ``tp``, ``vpp``, ``pp``): every installed merger
runs in ``(priority, name)`` order, each as ``merge(graphs, layout) ->
graphs``, starting from the group's graphs ordered by (pp, tp); a merger with
nothing to do for the layout returns its input. probe-parallel-merge's
priorities make ``tp`` merge each stage's ranks, then ``vpp`` cut stages into
model chunks, then ``pp`` stitch them into one graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from probe_core.api import GraphError
from probe_graph.model import Graph

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
AXES = ("tp", "cp", "ep", "dp", "pp")


@dataclass(frozen=True)
class Layout:
    """One side's parallel layout."""

    rank_size: int
    tp: int = 1
    pp: int = 1
    vpp: int = 1
    order: str = DEFAULT_ORDER

    def __post_init__(self) -> None:
        for name in ("rank_size", "tp", "pp", "vpp"):
            if getattr(self, name) < 1:
                raise GraphError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.rank_size % (self.tp * self.pp):
            raise GraphError(f"--rank-size {self.rank_size} is not a multiple of tp*pp = {self.tp}*{self.pp}; "
                             "rank_size = tp * pp * dp (cp and ep are not supported)")
        axes = self.order.replace("_", "-").split("-")
        if sorted(axes) != sorted(AXES):
            raise GraphError(f"--order {self.order!r}: give the five axes tp, cp, ep, dp, pp joined by '-', "
                             f"e.g. {DEFAULT_ORDER}")

    @property
    def dp(self) -> int:
        return self.rank_size // (self.tp * self.pp)

    @property
    def is_trivial(self) -> bool:
        return self.tp == 1 and self.pp == 1 and self.vpp == 1

    def coords(self, rank: int) -> dict[str, int]:
        """``{"tp": i, "dp": j, "pp": k, ...}`` of ``rank``; the first axis of ``order`` varies fastest."""
        sizes = {"tp": self.tp, "cp": 1, "ep": 1, "dp": self.dp, "pp": self.pp}
        found = {}
        for axis in self.order.replace("_", "-").split("-"):
            found[axis] = rank % sizes[axis]
            rank //= sizes[axis]
        return found


def merge_side(graphs: Sequence[Graph], layout: Layout, registry: Any) -> Graph:
    """Merge one data-parallel group's graphs (ordered by (pp, tp)) into one graph, merger by merger."""
    if len(graphs) != layout.tp * layout.pp:
        raise GraphError(f"a data-parallel group has {len(graphs)} ranks, expected tp*pp = {layout.tp * layout.pp}")
    mergers = registry.graph_mergers if registry is not None else {}
    needed = [axis for axis in ("tp", "vpp", "pp") if getattr(layout, axis) > 1 and axis not in mergers]
    if needed:
        raise GraphError(f"the layout needs the graph merger(s) {', '.join(needed)}, which are not installed "
                         f"(mergers: {', '.join(mergers) or 'none'}); pip install probe-parallel-merge, or enable "
                         "it in config.json \"plugins\"")
    merged = list(graphs)
    for spec in mergers.values():
        merged = list(spec.load().merge(merged, layout))
    if len(merged) != 1:
        raise GraphError(f"the graph mergers ({', '.join(mergers)}) left {len(merged)} graphs for one data-parallel "
                         f"group instead of one; check --tp/--pp/--vpp against the training script")
    graph = merged[0]
    graph.renumber()
    return graph
