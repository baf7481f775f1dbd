"""What one output graph is made of: :class:`GraphJob` (planned by ``service``, grouped by ``merge``)."""

from __future__ import annotations

from dataclasses import dataclass

from probe_core.graph.source import RankFolder


@dataclass(frozen=True)
class GraphJob:
    """One output graph: the rank dumps of each side that make it."""

    step: int
    rank: int
    target: tuple[RankFolder, ...]
    bench: tuple[RankFolder, ...] | None = None
