"""What one output graph is made of: :class:`GraphJob` (planned by ``service``), and :func:`group_jobs`, the jobs of
ranks merged under a parallel :class:`~probe_core.api.Layout`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from probe_core.api import GraphError
from probe_graph.api import Layout
from probe_graph.source import RankFolder


@dataclass(frozen=True)
class GraphJob:
    """One output graph: the rank dumps of each side that make it."""

    step: int
    rank: int
    target: tuple[RankFolder, ...]
    bench: tuple[RankFolder, ...] | None = None


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
    target_groups = _side_groups(targets, layouts[0], "target")
    if benches is None:
        return [GraphJob(step, dp, tuple(group)) for (step, dp), group in sorted(target_groups.items())]
    bench_groups = _side_groups(benches, layouts[1], "bench")
    if len(target_groups) != len(bench_groups):
        raise GraphError(f"the target makes {len(target_groups)} merged graphs (dp={layouts[0].dp}) but the bench "
                         f"{len(bench_groups)} (dp={layouts[1].dp}); both sides need the same data parallelism")
    return [GraphJob(t_key[0], t_key[1], tuple(target_groups[t_key]), tuple(bench_groups[b_key]))
            for t_key, b_key in zip(sorted(target_groups), sorted(bench_groups))]
