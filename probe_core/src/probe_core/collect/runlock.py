"""One run per dump path: refuse a path that already holds another run, and a second live writer.

A collection takes a lock on ``{dump_path}/.probe_run.lock`` from its first write to its end and writes
``{dump_path}/.probe_run.json`` (``{"job": ..., "pid": ..., "started": ...}``). The processes of one
distributed job (same launcher process and ``MASTER_ADDR``/``MASTER_PORT``, ...) share the job key, so its
ranks write side by side; any other process is refused while a writer lives, and
a path holding an earlier run's steps is refused unless ``overwrite`` (``probe run --overwrite``),
which removes the old ``step*`` folders first. The lock is an ``flock``: it dies with its process, so a
killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from probe_core.errors import CollectionError

LOCK_NAME = ".probe_run.lock"
MARKER_NAME = ".probe_run.json"
_STEP = re.compile(r"^step\d+$")
#: seconds a rank waits for the lock a sibling rank of its job may be taking (another run's refusal comes after)
JOIN_WAIT = 5.0
_JOB_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MS_SCHED_HOST", "MS_SCHED_PORT",
            "RANK_SIZE", "RANK_TABLE_FILE")


def job_key() -> str:
    """Shared by the processes of one distributed job (one launcher: torchrun, mp.spawn, msrun — the same
    parent process and rendezvous variables), unique to a single process otherwise."""
    env = [f"{name}={os.environ[name]}" for name in _JOB_ENV if os.environ.get(name)]
    if env:
        return f"job ppid={os.getppid()} " + " ".join(env)
    return f"process pid={os.getpid()}"


def previous_run(root: Path) -> list[str]:
    """The step folders an earlier run left in ``root`` (with a dump file or a journal), sorted."""
    if not root.is_dir():
        return []
    steps = []
    for child in root.iterdir():
        if _STEP.match(child.name) and child.is_dir() and not child.is_symlink() and any(
                (rank / "dump.json").exists() or (rank / ".journal.jsonl").exists() or (rank / "debug.json").exists()
                for rank in child.iterdir() if rank.is_dir()):
            steps.append(child.name)
    return sorted(steps, key=lambda name: int(name[4:]))


def _marker(root: Path) -> dict[str, Any]:
    try:
        value = json.loads((root / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _held(root: Path) -> bool:
    """Whether a live process holds the lock of ``root`` (probed without taking it for long)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock
        return False
    path = root / LOCK_NAME
    if not path.is_file():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


lock_held = _held  # its public name (probe_core.api): probe recover refuses a dump a live run still writes


def _refusal(root: Path, steps: list[str]) -> str:
    shown = ", ".join(steps[:3]) + (f", ... ({len(steps)} steps)" if len(steps) > 3 else "")
    return (f'dump_path "{root}" already holds a run ({shown}); a new run would mix its steps with the old '
            "ones: pass --overwrite (config key \"overwrite\": true) to replace it, or choose a new dump_path")


def check_free(root: Path, overwrite: bool) -> None:
    """Raise :class:`CollectionError` when ``root`` cannot take a new run (writes nothing). A lock held under
    another job's marker is waited for up to :data:`JOIN_WAIT` seconds: a sibling rank may have just taken it
    for this job (its marker comes next, once it has replaced an earlier run's)."""
    deadline = time.monotonic() + JOIN_WAIT
    marker = _marker(root)
    while marker.get("job") != job_key() and _held(root) and time.monotonic() < deadline:
        time.sleep(0.05)
        marker = _marker(root)
    if marker.get("job") == job_key():
        return  # another rank of this job, or this process again
    if _held(root):
        raise CollectionError(f'dump_path "{root}" is being written by another probe run (pid {marker.get("pid", "?")},'
                              f" started {marker.get('started', '?')}); two writers would mix their steps: wait for "
                              "it to finish, or choose another dump_path")
    steps = previous_run(root)
    if steps and not overwrite:
        raise CollectionError(_refusal(root, steps))


class RunLock:
    """The lock a collection holds on its dump path (see the module docstring)."""

    def __init__(self, root: Path, overwrite: bool = False) -> None:
        self.root = root
        self.overwrite = overwrite
        self._fd: int | None = None
        self._done = False

    def acquire(self) -> None:
        """Take the lock before the first write (idempotent; a collection that writes nothing takes none)."""
        if self._done:
            return
        self._done = True
        try:
            import fcntl
        except ImportError:  # pragma: no cover
            return
        root, key, overwrite = self.root, job_key(), self.overwrite
        root.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            self._fd = os.open(root / LOCK_NAME, flags, 0o640)
        except OSError as exc:
            raise CollectionError(f"{root / LOCK_NAME}: cannot create the run lock ({exc.strerror}); "
                                  "choose a writable dump_path without links") from None
        deadline = time.monotonic() + JOIN_WAIT
        while True:
            if _marker(root).get("job") == key:  # a sibling rank got here first (it may still be replacing an
                fcntl.flock(self._fd, fcntl.LOCK_SH)  # earlier run: this waits for it)
                return
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:  # another job's marker under a held lock may be an earlier run's that a sibling
                if time.monotonic() > deadline:  # rank, holding the lock, is about to replace: wait for it
                    marker = _marker(root)
                    os.close(self._fd)
                    self._fd = None
                    raise CollectionError(
                        f'dump_path "{root}" is being written by another probe run (pid {marker.get("pid", "?")}, '
                        f"started {marker.get('started', '?')}); two writers would mix their steps: wait for it to "
                        "finish, or choose another dump_path") from None
                time.sleep(0.05)
        if _marker(root).get("job") != key:
            steps = previous_run(root)
            if steps and not overwrite:
                self.release()
                raise CollectionError(_refusal(root, steps))
            tmp = root / f".{MARKER_NAME}.{os.getpid()}.tmp"  # the marker first: siblings join, and wait on
            tmp.write_text(json.dumps({"job": key, "pid": os.getpid(),  # the lock while the old steps go
                                       "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}), encoding="utf-8")
            os.replace(tmp, root / MARKER_NAME)
            for step in steps:
                shutil.rmtree(root / step)
        fcntl.flock(self._fd, fcntl.LOCK_SH)  # siblings of this job may now join

    def release(self) -> None:
        """Drop the lock; the last writer removes the lock file, and the marker when the run is one process
        (the dump path then holds only step folders, as msprobe's do). A distributed job keeps its marker: a
        rank that starts writing after its siblings finished (ranks do not start or end together) must find
        its own job there, not an earlier run to refuse."""
        if self._fd is None:
            return
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no other rank of this job still writing
        except (ImportError, OSError):
            pass
        else:
            single = not job_key().startswith("job ")
            for name in (MARKER_NAME, LOCK_NAME) if single else (LOCK_NAME,):
                try:
                    os.unlink(self.root / name)
                except OSError:
                    pass
        os.close(self._fd)  # closing drops the flock
        self._fd = None
