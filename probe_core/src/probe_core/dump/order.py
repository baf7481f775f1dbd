"""Order anomalies of several ranks through their communication entries (msprobe's 定序 across ranks).

The ranks of a job run concurrently; the only points where one rank's state reaches another are its
communication calls (``Distributed.{op}.{n}.forward``). The k-th communication call of every rank is
taken as the same synchronisation point k, which splits each rank's execution order into epochs:
an entry's epoch is the number of its rank's communication entries before it.

An anomaly is whatever the caller looks for (a NaN/Inf for ``probe overflow-check``, a divergent entry
for ``probe compare``); this module only orders them:

* the first anomaly of the job is in the smallest epoch;
* within an epoch, a rank's own anomaly (made by its computation, before the sync point) comes before a
  *received* one: a communication entry whose inputs were clean but whose outputs are not, so the
  anomaly came in through the collective from another rank (or the collective made it);
* anomalies still tied (same epoch, both own or both received) happened concurrently on different
  ranks: nothing orders them, the lowest rank is named and :func:`concurrent_with` lists the others.

Limitation: point-to-point calls (send/recv) count as sync points of the rank that makes them, one
epoch each, like collectives. A pipeline whose ranks make different numbers of such calls gets epochs
that do not line up across ranks; so do collectives of sub-groups (TP vs DP groups) when the ranks
call different numbers of them. Within one rank the order is always exact (execution order).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from probe_core.dump.names import parse_entry_name
from probe_core.records import record

#: msprobe and probe name communication APIs ``Distributed.<op>.<n>.<forward|backward>``.
COMMUNICATION_PREFIX = "Distributed."


def is_communication(name: str) -> bool:
    """True for a communication call's forward entry (the sync point; backward entries are not calls)."""
    return name.startswith(COMMUNICATION_PREFIX) and parse_entry_name(name).direction != "backward"


def communication_positions(names: Iterable[str]) -> list[int]:
    """The execution-order positions of the communication entries among one rank's entry names (given in
    execution order, e.g. ``[ref.name for ref in dump.index()]``)."""
    return [position for position, name in enumerate(names) if is_communication(name)]


@record
class RankAnomaly:
    """One anomalous entry of one rank.

    ``index``: the entry's position in that rank's execution order (``DumpEntry.index``);
    ``received``: it is a communication entry whose inputs are clean and outputs are not;
    ``payload``: anything the caller wants back (not part of equality or ordering).
    """

    rank: int
    index: int
    name: str
    received: bool = False
    payload: Any = field(default=None, compare=False, hash=False)


def epoch_of(anomaly: RankAnomaly, communications: Mapping[int, Sequence[int]]) -> int:
    """How many of its rank's communication entries came before it (a communication entry's own
    epoch is its position among them)."""
    return bisect_left(communications.get(anomaly.rank, ()), anomaly.index)


def order_key(anomaly: RankAnomaly, communications: Mapping[int, Sequence[int]]) -> tuple[int, int, int, int]:
    """(epoch, received, rank, index): smaller is earlier."""
    return (epoch_of(anomaly, communications), int(anomaly.received), anomaly.rank, anomaly.index)


def order_across_ranks(anomalies: Sequence[RankAnomaly],
                       communications: Mapping[int, Sequence[int]]) -> list[RankAnomaly]:
    """Every anomaly, earliest first.

    ``communications[rank]``: the execution-order positions of that rank's communication entries, in
    order (a rank missing from it has none).
    """
    return sorted(anomalies, key=lambda anomaly: order_key(anomaly, communications))


def first_across_ranks(anomalies: Sequence[RankAnomaly],
                       communications: Mapping[int, Sequence[int]]) -> RankAnomaly | None:
    """The first anomaly of the job (``None`` when there is none); ties go to the lowest rank."""
    ordered = order_across_ranks(anomalies, communications)
    return ordered[0] if ordered else None


def concurrent_with(first: RankAnomaly, anomalies: Sequence[RankAnomaly],
                    communications: Mapping[int, Sequence[int]]) -> list[RankAnomaly]:
    """The anomalies of other ranks that nothing orders against ``first`` (same epoch, same kind),
    by rank: for each such rank its earliest one."""
    def level(anomaly: RankAnomaly) -> tuple[int, int]:
        return order_key(anomaly, communications)[:2]

    found: dict[int, RankAnomaly] = {}
    for anomaly in order_across_ranks(anomalies, communications):
        if anomaly.rank != first.rank and level(anomaly) == level(first):
            found.setdefault(anomaly.rank, anomaly)
    return list(found.values())
