"""What ``probe report`` reads: an output folder (its ``summary.json`` says which command wrote it; probe locate's
has ``locate_summary.json``), or two runs, which it compares first with the installed ``probe compare`` / ``probe
monitor compare`` into a scratch folder.

The files are the interface: nothing here imports the commands' modules; a command's output gets a reader in
:data:`READERS`.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probe_core.api import CompareError, PluginError, ProbeError
from probe_core.api import run_command as api_run_command
from probe_report.model import Report

SUMMARY = "summary.json"
LOCATE_SUMMARY = "locate_summary.json"
#: a monitor output's CSV: ``{tag}_{first}-{last}.csv`` in the folder or its rank folders
MONITOR_CSV = re.compile(r"^.+_\d+-\d+\.csv$")
#: the command that wrote a summary.json -> (module, reader function); the reader gets (folder, summary, path)
READERS = {"compare": ("probe_report.compare_input", "read_compare"),
           "monitor compare": ("probe_report.monitor_input", "read_monitor"),
           "acc-check": ("probe_report.acc_input", "read_acc_check"),
           "locate": ("probe_report.locate_input", "read_locate")}
WHAT = "the output folder of probe compare, probe monitor compare, probe acc-check or probe locate"


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CompareError(f"{path}: cannot be read as JSON ({exc}); pass {WHAT}, unmodified") from None
    if not isinstance(data, dict):
        raise CompareError(f"{path}: holds a {type(data).__name__}, not the object probe's commands write; pass "
                           f"{WHAT}")
    return data


def writer_of(summary: dict[str, Any]) -> str | None:
    """Which command wrote ``summary``: ``compare``, ``monitor compare`` or ``acc-check`` (their keys differ),
    else None."""
    if "quantities_at_first_step" in summary:
        return "monitor compare"
    if "row_counts" in summary and "ranks" in summary:
        return "compare"
    if "failing" in summary and "details_csv" in summary:
        return "acc-check"
    return None


def read_output(folder: Path) -> Report:
    """The report of one output folder."""
    path = folder / LOCATE_SUMMARY
    if path.is_file():
        writer = "locate"
        summary = read_json(path)
    else:
        path = folder / SUMMARY
        if not path.is_file():
            what = ("no such folder" if not folder.exists() else "no summary.json in it" if folder.is_dir()
                    else "not a folder")
            raise CompareError(f"{folder}: {what}; pass {WHAT} (-o OUT), or two runs to compare")
        summary = read_json(path)
        writer = writer_of(summary)
    if writer is None:
        raise CompareError(f"{path}: neither probe compare's (keys 'ranks', 'row_counts'), probe monitor compare's "
                           "(key 'quantities_at_first_step') nor probe acc-check's (keys 'failing', 'details_csv'); "
                           f"pass {WHAT}")
    from importlib import import_module

    module, function = READERS[writer]
    return getattr(import_module(module), function)(folder, summary, path)


def is_monitor_output(path: Path) -> bool:
    """A folder the training-state monitor wrote: its CSVs in it or in its rank folders."""
    if not path.is_dir():
        return False
    folders = [path] + [child for child in sorted(path.iterdir()) if child.is_dir()]
    return any(MONITOR_CSV.match(f.name) for folder in folders for f in folder.iterdir() if f.is_file())


def run_command(registry: Any, argv: list[str]) -> None:
    """``probe ARGV...`` through ``registry``'s command (so it is the installed compare, whatever plugin gives it)."""
    try:
        api_run_command(argv, registry)
    except PluginError:
        raise ProbeError(f"probe report: comparing two runs needs the command probe {argv[0]}, which is not "
                         "installed or not enabled (probe plugins lists what is); run it yourself and pass its -o "
                         "folder") from None


@contextlib.contextmanager
def compared(target: Path, bench: Path, registry: Any) -> Iterator[Path]:
    """Compare two runs (dumps, or monitor outputs) into a scratch folder, removed afterwards; yields it."""
    for path in (target, bench):
        if not path.exists():
            raise CompareError(f"{path}: no such file or folder; pass two runs (dumps or monitor outputs) or one "
                               "output folder of probe compare / probe monitor compare")
    with tempfile.TemporaryDirectory(prefix="probe-report-") as scratch:
        out = Path(scratch) / "compare"
        if is_monitor_output(target) and is_monitor_output(bench):
            run_command(registry, ["monitor", "compare", str(target), str(bench), "-o", str(out), "--no-xlsx"])
        else:
            run_command(registry, ["compare", str(target), str(bench), "-o", str(out), "--quiet"])
        yield out
