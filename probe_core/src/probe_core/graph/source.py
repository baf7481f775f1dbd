"""Find the rank dumps under a path and load each into a graph.

``-tp``/``-gp`` may name a rank folder (holds dump.json), a step folder of
``rank{N}`` / ``rank`` / ``proc{pid}`` folders, or a root of ``step{N}``
folders. Reading goes through :class:`probe_core.dump.reader.RankDump`; this
module only adds the graph's requirements (construct.json present and not
empty, stack.json present) with errors that say how to fix the dump.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from probe_core.errors import GraphError
from probe_core.graph.build import build_graph
from probe_core.graph.model import Graph

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^(?:rank(\d*)|proc\d+)$")  # proc{pid}: no distributed rank, counts as rank 0


@dataclass(frozen=True, order=True)
class RankFolder:
    """One rank's dump folder and where it sits (step, rank)."""

    step: int
    rank: int
    folder: Path


def _number(pattern: re.Pattern, name: str) -> int | None:
    match = pattern.match(name)
    if not match:
        return None
    digits = next((g for g in match.groups() if g), "")
    return int(digits) if digits else 0


def _ranks_in(step_folder: Path, step: int) -> list[RankFolder]:
    found = []
    for child in sorted(step_folder.iterdir()):
        rank = _number(_RANK, child.name)
        if rank is not None and child.is_dir() and not child.is_symlink():
            found.append(RankFolder(step, rank, child))
    return sorted(found)


def discover(path: str | Path) -> list[RankFolder]:
    """Every rank folder under ``path``, sorted by (step, rank)."""
    path = Path(path)
    if not path.exists():
        raise GraphError(f"{path}: no such file or folder; give a rank, step or dump root folder")
    if path.is_file():
        path = path.parent
    if (path / "dump.json").is_file():
        step = _number(_STEP, path.name)
        rank = _number(_RANK, path.name)
        if step is None and rank is not None:
            step = _number(_STEP, path.parent.name)
        return [RankFolder(step or 0, rank or 0, path)]
    steps = sorted((s, c) for c in path.iterdir() if c.is_dir() and (s := _number(_STEP, c.name)) is not None)
    if steps:
        found = [rank for step, folder in steps for rank in _ranks_in(folder, step) or _single(folder, step)]
        if not found:
            raise GraphError(f"{path}: step folders {', '.join(f.name for _, f in steps)} hold no rank folders "
                             "(rank0, rank1, ...) with a dump.json; point -tp at a dump made by probe or msprobe")
        return found
    ranks = _ranks_in(path, _number(_STEP, path.name) or 0)
    if ranks:
        return ranks
    raise GraphError(f"{path}: holds no dump.json, no rank folders (rank0, rank1, ...) and no step folders "
                     "(step0, ...); give a rank folder, a step folder or a dump root")


def _single(step_folder: Path, step: int) -> list[RankFolder]:
    return [RankFolder(step, 0, step_folder)] if (step_folder / "dump.json").is_file() else []


def load_graph(where: RankFolder, source: str = "NPU") -> Graph:
    """Read one rank folder into a graph (``source``: ``NPU`` for target, ``Bench`` for bench)."""
    from probe_core.dump.reader import RankDump

    folder = where.folder
    dump_file = folder / "dump.json"
    if not dump_file.is_file():
        raise GraphError(f"{folder}: no dump.json; this is not a rank folder of a dump")
    if not (folder / "stack.json").is_file():
        raise GraphError(f"{folder / 'stack.json'}: missing; the graph needs the call stacks: copy the whole "
                         "rank folder (dump.json, stack.json, construct.json) from the dump")
    with RankDump(dump_file, where.step, where.rank) as dump:
        construct = dump.construct
        if not construct:
            raise GraphError(f"{folder / 'construct.json'}: missing or empty; the dump was made at level L1 "
                             "(APIs only): re-dump with level L0 or mix to get the model structure")
        data = {entry.name: entry.data for entry in dump.entries()}
        return build_graph(construct, data, dump.stacks, rank=where.rank, step=where.step, source=source,
                           task=dump.task, dump_dir=dump.header.get("dump_data_dir"),
                           where=str(folder / "construct.json"))
