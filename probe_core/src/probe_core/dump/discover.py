"""Find the ``dump.json`` files under a path the user gave.

Accepted: a dump.json file; a rank folder (holding dump.json); a step folder
(holding ``rank{N}``/``rank``/``proc{pid}`` folders, or dump.json directly as
MindSpore writes it); a dump root (holding ``step{N}`` folders).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from probe_core.dump.reader import RankDump
from probe_core.errors import DumpError
from probe_core.selection import spans

DUMP_FILE = "dump.json"
JOURNAL = ".journal.jsonl"  # a step whose process died before writing dump.json: read from its journal
_RANK = re.compile(r"^(?:rank(\d*)|proc(\d+))$")
_STEP = re.compile(r"^step(\d+)$")


def _step_of(folder: Path) -> int | None:
    match = _STEP.match(folder.name)
    return int(match.group(1)) if match else None


def _rank_of(folder: Path) -> int | None:
    """``rank{N}`` -> N; ``rank`` or a lone ``proc{pid}`` -> 0; anything else -> None."""
    match = _RANK.match(folder.name)
    if not match:
        return None
    return int(match.group(1)) if match.group(1) else 0


def _rank_folders(folder: Path) -> list[tuple[int, Path]]:
    """``(rank, path)`` of the rank folders in ``folder`` that hold a dump.json.

    ``rank{N}`` is rank N, a bare ``rank`` is 0; ``proc{pid}`` folders (no
    rank known) are numbered 0, 1, ... in pid order after the real ranks.
    """
    ranked, procs = [], []
    for child in sorted(folder.iterdir()) if folder.is_dir() else ():
        match = _RANK.match(child.name)
        if not match or not _has_dump(child):
            continue
        if match.group(2) is not None:
            procs.append((int(match.group(2)), child))
        else:
            ranked.append((int(match.group(1) or 0), child))
    taken = {rank for rank, _ in ranked}
    free = (n for n in range(len(ranked) + len(procs) + 1) if n not in taken)
    ranked += [(next(free), path) for _, path in sorted(procs)]
    return sorted(ranked)


def _has_dump(folder: Path) -> bool:
    return (folder / DUMP_FILE).is_file() or (folder / JOURNAL).is_file()


def _in_step(folder: Path, step: int | None, lenient: bool) -> list[RankDump]:
    if _has_dump(folder):
        return [RankDump(folder / DUMP_FILE, step, None, lenient)]
    return [RankDump(path / DUMP_FILE, step, rank, lenient) for rank, path in _rank_folders(folder)]


def discover(path: str | Path, *, ranks: Iterable[int] | None = None, steps: Iterable[int] | None = None,
             lenient: bool = False) -> list[RankDump]:
    """Every rank dump under ``path``, ordered by (step, rank); optionally only some ranks/steps.

    Raises :class:`DumpError` when ``path`` does not exist, holds no
    dump.json, or the filters leave nothing (the message lists what exists).
    """
    root = Path(path)
    if not root.exists():
        raise DumpError(f"{root}: no such file or folder; give a dump.json, a rank folder, "
                        f"a step folder or a dump root")
    if root.is_file() or _has_dump(root):
        dump_file = root if root.is_file() else root / DUMP_FILE
        rank = _rank_of(dump_file.parent)
        step = _step_of(dump_file.parent if rank is None else dump_file.parent.parent)
        found = [RankDump(dump_file, step, rank, lenient)]
    elif _rank_folders(root):
        found = _in_step(root, _step_of(root), lenient)
    else:
        step_dirs = sorted((s, child) for child in root.iterdir()
                           if child.is_dir() and (s := _step_of(child)) is not None)
        found = [dump for step, folder in step_dirs for dump in _in_step(folder, step, lenient)]
    if not found:
        raise DumpError(f"{root}: no {DUMP_FILE} found; expected {root}/{DUMP_FILE}, {root}/rank*/{DUMP_FILE}, "
                        f"{root}/step*/rank*/{DUMP_FILE} or {root}/step*/{DUMP_FILE}")
    return _filter(found, root, ranks, steps)


def _filter(found: list[RankDump], root: Path, ranks: Iterable[int] | None,
            steps: Iterable[int] | None) -> list[RankDump]:
    keep = found
    if steps is not None:
        wanted = set(steps)
        keep = [d for d in keep if d.step in wanted or (d.step is None and len(found) == 1)]
        if not keep:
            have = sorted({d.step for d in found if d.step is not None})
            raise DumpError(f"{root}: no step {spans(wanted)} in this dump; steps present: {spans(have) or 'none'}")
    if ranks is not None:
        wanted = set(ranks)
        kept = [d for d in keep if (d.rank if d.rank is not None else 0) in wanted]
        if not kept:
            have = sorted({d.rank if d.rank is not None else 0 for d in keep})
            raise DumpError(f"{root}: no rank {spans(wanted)} in this dump; ranks present: {spans(have)}")
        keep = kept
    return sorted(keep, key=lambda d: (d.step if d.step is not None else -1, d.rank if d.rank is not None else -1))
