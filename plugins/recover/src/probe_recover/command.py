"""``probe recover DUMP``: finalise the steps a killed run left as record journals (plugin ``recover``).

A collection appends every record to ``step{N}/rank{R}/.journal.jsonl`` and writes ``dump.json`` when
the step ends. A run killed mid-step (SIGKILL, out of memory, a node lost) leaves only the journal:
``probe compare`` and ``probe graph`` read it with a warning; ``probe recover`` writes its
``dump.json``, ``stack.json`` and ``construct.json`` (header ``"partial": true, "recovered": true``) and
removes the journal. A journal beside a final ``dump.json`` (killed between the two) is only removed.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from probe_core.api import CommandSpec, DumpError, hookimpl

JOURNAL = ".journal.jsonl"


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dump", metavar="DUMP", help="a dump root, step folder or rank folder")
    parser.add_argument("--keep-journal", action="store_true", help="keep the journals after writing dump.json")


def journals(root: Path) -> list[Path]:
    """The rank folders under ``root`` (itself included, two levels down) holding a record journal."""
    if not root.exists():
        raise DumpError(f"{root}: no such folder; give the dump path of a probe run (or a step/rank folder of it)")
    if not root.is_dir():
        raise DumpError(f"{root}: not a folder; give the dump path of a probe run (or a step/rank folder of it)")
    found = [root] if (root / JOURNAL).is_file() else []
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.is_symlink():
            if (child / JOURNAL).is_file():
                found.append(child)
            found += [rank for rank in sorted(child.iterdir()) if rank.is_dir() and not rank.is_symlink()
                      and (rank / JOURNAL).is_file()]
    return found


def _live_writer(root: Path) -> Path | None:
    from probe_core.api import lock_held

    for folder in (root, root.parent, root.parent.parent):
        if lock_held(folder):
            return folder
    return None


def recover(root: Path, keep_journal: bool = False) -> list[tuple[Path, str]]:
    """Finalise every journal under ``root``; returns (rank folder, what was done)."""
    from probe_core.api import drop_unwritten, read_journal, recover_step

    live = _live_writer(root)
    if live is not None:
        raise DumpError(f"{live}: a probe run is still writing here; its journals are not abandoned: wait for the "
                        "run to end (or stop it), then run probe recover again")
    done = []
    for folder in journals(root):
        journal = folder / JOURNAL
        if (folder / "dump.json").is_file():
            if not keep_journal:
                journal.unlink()
            done.append((folder, "already final (dump.json present): stale journal removed"))
            continue
        records = read_journal(journal)
        if records.problem:
            warnings.warn(f"{journal}: {records.problem}; recovered the records before it", _probe_warning(),
                          stacklevel=2)
        if not records.entries and not records.debug:
            if not keep_journal:
                journal.unlink()
            done.append((folder, "no record: journal removed"))
            continue
        recorded = len(records.entries)
        drop_unwritten(records, folder / "dump_tensor_data")  # what recover_step leaves out too
        written = {path.name for path in recover_step(folder, remove_journal=not keep_journal)}
        done.append((folder, f"recovered {len(records.entries)} of {recorded} entries (dump.json marked partial)"
                     if "dump.json" in written else
                     "nothing to recover: every entry names a tensor file the run never wrote (no dump.json)"))
    return done


def _probe_warning() -> type[Warning]:
    from probe_core.api import ProbeWarning

    return ProbeWarning


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    root = Path(args.dump)
    done = recover(root, args.keep_journal)
    console = Console()
    if not done:
        console.print(f"nothing to recover under {root}: every step there is final", markup=False)
    for folder, what in done:
        console.print(f"{folder}: {what}", highlight=False, markup=False)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("recover", "finalise the steps a killed run left as record journals (writes dump.json)",
                        _configure, _run)]
