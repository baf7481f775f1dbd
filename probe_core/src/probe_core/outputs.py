"""Output folders every writing command shares: checked before work starts, written without surprises.

- :func:`prepare_output_dir` checks an ``-o`` folder before any work: it is
  not a file, not a symbolic link, can be created, is writable and has room;
  each failure is one :class:`~probe_core.errors.ProbeError` line naming the
  flag, the path and the fix.
- :func:`create_exclusive` opens a new file that no other run holds
  (``O_EXCL``, no symbolic link followed); :func:`unique_path` picks a name
  that is free, so two commands started in the same second into one folder
  keep both results (``name.csv``, then ``name_1.csv``, ...).
- :func:`replaced_whole` gives a temporary name renamed over a file when it is complete, so a full
  disk leaves the old file, never a half-written one.
- :func:`writing` turns an ``OSError`` met while writing (a full disk, a
  folder made read-only mid-way) into one line that says what was written
  completely and what was not.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from probe_core.errors import ProbeError

#: Free bytes an output folder must have before a command starts (results are small; a full disk is not).
MIN_FREE_BYTES = 1 << 20

_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class OutputError(ProbeError):
    """An output folder or file cannot be written."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def prepare_output_dir(path: str | os.PathLike, *, flag: str = "-o", min_free: int = MIN_FREE_BYTES) -> Path:
    """Create ``path`` if needed and check it can take a command's results; return it.

    Raises :class:`OutputError` (one line: ``{flag} {path}: what is wrong; what to do``) when ``path``
    is a file, a symbolic link, in a folder that cannot be written, or on a disk with less than
    ``min_free`` bytes free.
    """
    out = Path(path)
    if out.is_symlink():
        raise OutputError(f"{flag} {out}: is a symbolic link; give a real folder for the results")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{flag} {out}: exists and is not a folder; give a folder for the results")
    existing = _nearest_existing(out.absolute())
    if not existing.is_dir():
        raise OutputError(f"{flag} {out}: {existing} is a file, so the folder cannot be created; give another path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{flag} {out}: cannot be created ({exc.strerror or exc}); give a folder you can "
                          f"write to") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(f"{flag} {out}: is not writable; give a folder you can write to")
    try:
        free = shutil.disk_usage(out).free
    except OSError:
        free = min_free
    if free < min_free:
        raise OutputError(f"{flag} {out}: the disk has {free} bytes free; free some space or give a folder on "
                          f"another disk")
    return out


@contextmanager
def output_folder(path: str | os.PathLike, *, flag: str = "-o", min_free: int = MIN_FREE_BYTES) -> Iterator[Path]:
    """:func:`prepare_output_dir` for the length of a command: a folder it created is removed again when the
    command leaves it empty (it stopped at an error before writing anything, or had nothing to write)."""
    created = not os.path.lexists(path)
    try:
        yield prepare_output_dir(path, flag=flag, min_free=min_free)
    finally:
        if created:
            try:
                os.rmdir(path)  # only an empty folder goes
            except OSError:
                pass


def unique_path(folder: str | os.PathLike, name: str) -> Path:
    """``folder/name``, or ``folder/{stem}_{n}{suffix}`` with the smallest free ``n`` when taken.

    Only a hint: write the file with :func:`create_exclusive`, which fails when another process took
    the name in between (call again then)."""
    folder = Path(folder)
    path = folder / name
    if not os.path.lexists(path):
        return path
    stem, dot, suffix = name.partition(".")
    n = 1
    while os.path.lexists(candidate := folder / f"{stem}_{n}{dot}{suffix}"):
        n += 1
    return candidate


def create_exclusive(folder: str | os.PathLike, name: str, mode: str = "w", *, exact: bool = False,
                     **kwargs) -> tuple[Path, IO]:
    """Open a new file ``folder/name`` (or a free variant of it, see :func:`unique_path`) that no
    other run holds, never through a symbolic link. Returns ``(path, file object)``. ``exact``: that
    name or :class:`FileExistsError` (for names that must share a timestamp)."""
    for _ in range(1000):
        path = Path(folder) / name if exact else unique_path(folder, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            if exact:
                raise
            continue
        return path, open(fd, mode, **kwargs)
    raise OutputError(f"{folder}: no free name for {name}; clean the folder")


@contextmanager
def replaced_whole(path: Path) -> Iterator[Path]:
    """A temporary name next to ``path`` to write to: renamed to ``path`` when the block ends, removed when it
    fails, so ``path`` is either its old self or complete (never half-written after a full disk)."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))  # umask applies
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_new(folder: str | os.PathLike, name: str, text: str) -> Path:
    """Write ``text`` (UTF-8) to a new file ``folder/name``, or a free variant of the name
    (:func:`create_exclusive`); return the path written."""
    path, handle = create_exclusive(folder, name, encoding="utf-8")
    with handle:
        handle.write(text)
    return path


def no_room(exc: OSError) -> bool:
    """The error says the disk (or quota, or file-size limit) is full."""
    return exc.errno in _NO_ROOM


@contextmanager
def writing(what: str, done: Callable[[], list[str]] | None = None) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into one :class:`OutputError` line.

    ``what`` names what was being written (``"the compare results in out/"``); ``done()`` lists the
    files written completely by then, so the user knows what to keep.
    """
    try:
        yield
    except FileExistsError:  # a name another run took: the caller's to handle (see create_exclusive)
        raise
    except OSError as exc:
        reason = "the disk is full" if no_room(exc) else (exc.strerror or str(exc))
        complete = done() if done else []
        kept = (f"; written completely: {', '.join(complete)}" if complete else "; nothing was written completely")
        where = f" ({exc.filename})" if exc.filename else ""
        raise OutputError(f"writing {what}: {reason}{where}{kept}; free space or fix the folder's permissions and "
                          f"run again") from None


def human_size(count: int) -> str:
    """A byte count as people read it: ``512 B``, ``3.4 MiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
