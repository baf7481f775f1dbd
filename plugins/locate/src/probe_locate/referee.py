"""Stage 1's referee: the two sides' runs end right after the first step where they part.

probe locate (the referee, in its own process) and every rank of a refereed side talk through files in
``OUT/stage1-monitor/referee/SIDE/`` only, no collective inside the user's training:

- after each step, each rank writes ``rank{R}.json`` (``{"step": K, "world": N}``, the step it finished and its
  job's world size), then waits for ``verdict.json`` to have checked step K;
- the referee, once every rank of every side has finished step K (or the side's command has ended: its output is
  then final), runs ``probe monitor compare`` of the two monitor outputs (``referee/compare/``) and writes
  ``verdict.json``: ``{"pid": P, "checked": K, "parted": FIRST_DIVERGENCE or null, "free": false}``.

While the ranks wait nothing is written, so the compare reads whole steps; a step's verdict depends on the steps up
to it only (the compare judges a step against the earlier ones), so it is the final compare's. The compare is
incremental (``--incremental``: ``referee/compare/incremental_state.json`` keeps the steps judged and their noise), so
each check reads the new step's rows only, not both outputs from step 0 again. Every rank reads the
same verdict, so all ranks of both sides end after the same step without talking: the step where the runs part.
``"free": true`` (the compare failed: the final one will say why) lets the sides run on unchecked; a rank also goes
on unchecked when the referee's process ``P`` is gone (probe locate killed).

A side not refereed (the bench, when the sides run one after the other: nothing to compare it with yet) runs on;
the referee compares the target with it once it has ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from probe_core.api import ProbeError, run_command

VERDICT = "verdict.json"
#: seconds between two looks at the files, for a waiting rank and for the referee
POLL = 0.02


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` into ``path`` whole (a reader never sees half of it)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_verdict(folder: Path, rank: int, world: int, step: int) -> dict[str, Any] | None:
    """A rank's side: report ``step`` finished, wait until the referee has checked it; the divergence found up to it
    (``None``: the runs agree so far, or the sides run on unchecked)."""
    write_json(folder / f"rank{rank}.json", {"step": step, "world": world})
    while True:
        verdict = _read_json(folder / VERDICT) or {}
        if verdict.get("free") or verdict.get("checked", -1) >= step:
            return verdict.get("parted")
        if not _alive(verdict.get("pid", os.getppid())):
            return None
        time.sleep(POLL)


class Referee:
    """probe locate's side: ``check(ended)`` is called over and over while the commands run, with the sides whose
    command has ended; it gives the next step's verdict once every side has finished that step or ended."""

    def __init__(self, folder: Path, monitors: dict[str, Path], refereed: list[str], registry: Any,
                 compare_options: list[str]) -> None:
        self.folder, self.monitors, self.refereed = folder, monitors, refereed
        self.registry, self.options = registry, compare_options
        self.checked, self.done = -1, False
        for side in refereed:
            (folder / side).mkdir(parents=True, exist_ok=True)
            self._publish({"checked": -1, "parted": None, "free": False}, [side])

    def _publish(self, verdict: dict[str, Any], sides: list[str] | None = None) -> None:
        for side in sides or self.refereed:
            write_json(self.folder / side / VERDICT, {"pid": os.getpid(), **verdict})

    def _finished(self, side: str, step: int) -> bool:
        """Whether every rank of ``side`` has reported ``step`` finished (how many ranks: the world size they say)."""
        reports = [_read_json(path) or {} for path in (self.folder / side).glob("rank*.json")]
        world = max((report.get("world", 1) for report in reports), default=1)
        return len(reports) >= world and all(report.get("step", -1) >= step for report in reports)

    def check(self, ended: set[str]) -> None:
        if self.done or set(self.refereed) <= ended:
            return
        step = self.checked + 1
        if not all(side in ended or (side in self.refereed and self._finished(side, step)) for side in self.monitors):
            return
        try:
            parted = self._compare()
        except ProbeError as exc:  # the final compare of stage 1 says it again, with its context
            self._publish({"checked": step, "parted": None, "free": True, "error": str(exc)})
            self.done = True
            return
        self._publish({"checked": step, "parted": parted, "free": False})
        self.checked, self.done = step, parted is not None

    def _compare(self) -> dict[str, Any] | None:
        """``probe monitor compare --incremental`` of the steps the monitor outputs hold now: its first divergence up
        to them, if any."""
        out = self.folder / "compare"
        argv = ["monitor", "compare", self.monitors["target"], self.monitors["bench"], "-o", out, "--summary-only",
                "--incremental", *self.options]
        with open(self.folder / "compare.log", "a") as log, contextlib.redirect_stdout(log), \
                contextlib.redirect_stderr(log):
            run_command([str(a) for a in argv], self.registry)
        return (_read_json(out / "summary.json") or {}).get("first_divergence")
