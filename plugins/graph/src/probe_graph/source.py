"""Find the rank dumps under a path and load each into a graph.

``-tp``/``-gp`` may name a rank folder, a step folder of rank folders, or a
root of step folders; finding and reading the files is the dump reader's job
(:func:`probe_core.api.discover`, :class:`probe_core.api.RankDump`). This
module adds what a graph needs beyond a dump (construct.json present and not
empty, stack.json present), with errors that say how to fix the dump.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_core.api import DumpError, GraphError
from probe_graph.api import Graph, build_graph
from probe_graph.tree import hidden_params_grads, place_params_grads, repair_inplace


@dataclass(frozen=True, order=True)
class RankFolder:
    """One rank's dump: its step, rank and dump.json (picklable, for worker processes)."""

    step: int
    rank: int
    dump_file: Path

    @property
    def folder(self) -> Path:
        return self.dump_file.parent


def discover(path: str | Path, ranks: list[int] | None = None, steps: list[int] | None = None) -> list[RankFolder]:
    """Every rank dump under ``path``, sorted by (step, rank); only ``ranks`` and ``steps`` when given."""
    from probe_core.api import discover as discover_dumps

    path = Path(path)
    if path.is_dir() and not (path / "dump.json").is_file():
        folders = [c for c in path.iterdir() if c.is_dir() and c.name.startswith("step")]
        empty = [s.name for s in folders if not any(_has_dump(r) for r in s.iterdir() if r.is_dir())
                 and not _has_dump(s)]
        if folders and len(empty) == len(folders):
            raise GraphError(f"{path}: step folders {', '.join(sorted(empty))} hold no rank folders (rank0, "
                             "rank1, ...) with a dump.json; point -tp/-gp at a dump made by probe or msprobe")
    try:
        dumps = discover_dumps(path, ranks=ranks, steps=steps)
    except DumpError as exc:
        raise GraphError(*exc.messages) from None
    return sorted(RankFolder(d.step or 0, d.rank or 0, d.dump_file) for d in dumps)


def _has_dump(folder: Path) -> bool:
    return (folder / "dump.json").is_file() or (folder / ".journal.jsonl").is_file()


def _has_journal_only(folder: Path) -> bool:
    return not (folder / "dump.json").is_file() and (folder / ".journal.jsonl").is_file()


def load_graph(where: RankFolder, source: str = "NPU", registry: Any = None, msprobe_tree: bool = False) -> Graph:
    """Read one rank dump into a graph (``source``: ``NPU`` for target, ``Bench`` for bench), its backward parents
    repaired where an in-place op broke them (:mod:`probe_graph.tree`); ``msprobe_tree`` (``--rules msprobe``)
    also leaves out the parameter gradients msprobe does not show.

    With a plugin ``registry`` the graph also learns its data mode (``graph.mode``, the mode's name).
    """
    from probe_core.api import RankDump

    folder = where.folder
    if not (folder / "stack.json").is_file() and not _has_journal_only(folder):
        raise GraphError(f"{folder / 'stack.json'}: missing; the graph needs the call stacks: copy the whole "
                         "rank folder (dump.json, stack.json, construct.json) from the dump")
    with RankDump(where.dump_file, where.step, where.rank) as dump:
        construct = dump.construct
        if not construct:
            raise GraphError(f"{folder / 'construct.json'}: missing or empty; the dump was made at level L1 "
                             "(APIs only): re-dump with level L0 or mix to get the model structure")
        data = dump.values()
        if msprobe_tree:
            hidden = hidden_params_grads(construct, data)
            data = {name: entry for name, entry in data.items() if name not in hidden}
        construct = place_params_grads(repair_inplace(construct), data)
        mode = dump.mode(registry).name if registry is not None and data else ""
        framework = dump.framework or ""
        graph = build_graph(construct, data, dump.stacks, rank=where.rank, step=where.step, source=source,
                            task=dump.task, dump_dir=_dump_dir(dump), where=str(folder / "construct.json"))
    graph.mode, graph.dump_file, graph.framework = mode, str(where.dump_file), framework
    return graph


def _dump_dir(dump: Any) -> str | None:
    """The header's ``dump_data_dir``: the tensor folder's path, or null."""
    from probe_core.api import short_text as _short

    value = dump.header.get("dump_data_dir")
    if value is not None and not isinstance(value, str):
        raise GraphError(f'{dump.dump_file}: header key "dump_data_dir" is {type(value).__name__} {_short(value)}, '
                         "not the tensor folder's path or null; set it to the path of dump_tensor_data (or null), "
                         "or dump again")
    return value
