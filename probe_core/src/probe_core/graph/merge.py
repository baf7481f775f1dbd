"""Merge per-rank graphs into whole-model graphs under a parallel layout, through graph-merger plugins.

A :class:`Layout` (``--rank-size --tp --pp --vpp --order``) places each rank
on the (tp, dp, pp) grid; every data-parallel group becomes one job whose
ranks are merged. The merging itself is the plugins' (``probe_graph_mergers``,
e.g. probe-parallel-merge's ``tp``, ``vpp``, ``pp``), called in this order:

* ``tp``: ``merge(graphs, layout) -> [graph]`` once per pipeline stage, with
  that stage's tensor-parallel graphs in tp order;
* ``vpp``: ``merge(stage_graphs, layout) -> stage_graphs`` over the stages;
* ``pp``: ``merge(stage_graphs, layout) -> [graph]`` stitches the stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from probe_core.errors import GraphError
from probe_core.graph.model import Graph

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


def _side_groups(folders: Sequence[Any], layout: Layout, label: str) -> dict[tuple[int, int], list[Any]]:
    """``{(step, dp): rank folders ordered by (pp, tp)}`` for one side."""
    groups: dict[tuple[int, int], list[tuple[int, int, Any]]] = {}
    steps: dict[int, list[int]] = {}
    for folder in folders:
        steps.setdefault(folder.step, []).append(folder.rank)
        if folder.rank >= layout.rank_size:
            raise GraphError(f"{label}: rank {folder.rank} is outside --rank-size {layout.rank_size}")
        where = layout.coords(folder.rank)
        groups.setdefault((folder.step, where["dp"]), []).append((where["pp"], where["tp"], folder))
    for step, ranks in steps.items():
        if len(ranks) != layout.rank_size:
            raise GraphError(f"{label}: step {step} has {len(ranks)} rank folders but --rank-size is "
                             f"{layout.rank_size}; give every rank's dump or fix --rank-size")
    return {key: [f for _, _, f in sorted(items, key=lambda i: (i[0], i[1]))] for key, items in groups.items()}


def group_jobs(targets: Sequence[Any], benches: Sequence[Any] | None, layouts: tuple[Layout, Layout]) -> list[Any]:
    """One job per (step, data-parallel group), each side's ranks ordered by (pp, tp)."""
    from probe_core.graph.service import GraphJob

    target_groups = _side_groups(targets, layouts[0], "target")
    if benches is None:
        return [GraphJob(step, dp, tuple(group)) for (step, dp), group in sorted(target_groups.items())]
    bench_groups = _side_groups(benches, layouts[1], "bench")
    if len(target_groups) != len(bench_groups):
        raise GraphError(f"the target makes {len(target_groups)} merged graphs (dp={layouts[0].dp}) but the bench "
                         f"{len(bench_groups)} (dp={layouts[1].dp}); both sides need the same data parallelism")
    return [GraphJob(t_key[0], t_key[1], tuple(target_groups[t_key]), tuple(bench_groups[b_key]))
            for t_key, b_key in zip(sorted(target_groups), sorted(bench_groups))]


def _merger(registry: Any, name: str) -> Any:
    specs = registry.graph_mergers if registry is not None else {}
    spec = specs.get(name)
    if spec is None:
        raise GraphError(f"no graph merger {name!r} is installed (mergers: {', '.join(specs) or 'none'}); "
                         "pip install probe-parallel-merge, or enable it in config.json \"plugins\"")
    return spec.load()


def merge_side(graphs: Sequence[Graph], layout: Layout, registry: Any) -> Graph:
    """Merge one data-parallel group's graphs (ordered by (pp, tp)) into one graph."""
    if len(graphs) != layout.tp * layout.pp:
        raise GraphError(f"a data-parallel group has {len(graphs)} ranks, expected tp*pp = {layout.tp * layout.pp}")
    stages = [list(graphs[i * layout.tp:(i + 1) * layout.tp]) for i in range(layout.pp)]
    if layout.tp > 1:
        tp = _merger(registry, "tp")
        merged_stages = [tp.merge(stage, layout)[0] for stage in stages]
    else:
        merged_stages = [stage[0] for stage in stages]
    if layout.vpp > 1:
        merged_stages = list(_merger(registry, "vpp").merge(merged_stages, layout))
    if len(merged_stages) > 1:
        merged_stages = list(_merger(registry, "pp").merge(merged_stages, layout))
    graph = merged_stages[0]
    graph.renumber()
    return graph
