"""The monitor's output folder, kept the way ``probe run`` keeps a dump path (:mod:`probe_core.collect.runlock`).

* one run per folder: a folder that already holds a monitor run (rank folders with files, msprobe's
  ``{time}-rank{R}-{id}`` or ``rank{R}``: :mod:`probe_monitor.layout`) is refused unless ``overwrite`` (monitor
  config key ``"overwrite": true``; ``probe run --overwrite``), which removes the old rank folders first;
* one writer at a time: the run lock is held from the monitor's start to its end, so a second monitor
  (or dump) run into the same folder is refused while the first lives; the ranks of one distributed
  job share it and write their ``{time}-rank{R}-{id}`` folders side by side;
* no write through a symbolic link: neither the folder itself nor its rank folders may be links.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from probe_core.api import check_free, job_key, MARKER_NAME, RunLock, safe_dir
from probe_monitor.errors import MonitorError
from probe_monitor.layout import folder_name, run_folders

WHERE = "probe run --dump-path, TrainerMon(output_dir=...) or $MONITOR_OUTPUT_DIR"


def previous_run(root: Path) -> list[str]:
    """The rank folders earlier monitor runs left in ``root`` (those holding anything), sorted by rank; a rank
    folder that is a symbolic link is an error (the monitor neither writes nor removes through links)."""
    folders = [folder for same_rank in run_folders(root).values() for folder in same_rank]
    link = next((folder for folder in folders if folder.is_symlink()), None)
    if link is not None:
        raise MonitorError(f"{link}: is a symbolic link; the monitor never writes or removes through links: remove "
                           f"it, or choose another folder ({WHERE})")
    return [folder.name for folder in folders if any(folder.iterdir())]


def _this_job(root: Path) -> bool:
    """Whether the run marker of ``root`` is this job's (a sibling rank, or this process, got there first)."""
    try:
        return json.loads((root / MARKER_NAME).read_text(encoding="utf-8")).get("job") == job_key()
    except (OSError, ValueError, AttributeError):
        return False


def open_output(root: Path, rank: int, overwrite: bool) -> tuple[Path, RunLock]:
    """Check ``root``, take its run lock and create this rank's ``{time}-rank{rank}-{id}`` folder in it; returns
    (that folder, the lock)."""
    if root.is_symlink():
        raise MonitorError(f"{root}: is a symbolic link; the monitor never writes through links: choose another "
                           f"folder ({WHERE})")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MonitorError(f"{root}: cannot be created ({exc.strerror or exc}); pass a writable folder "
                           f"({WHERE})") from None
    check_free(root, overwrite)  # another live writer, a dump run
    if not _this_job(root):
        old = previous_run(root)
        if old and not overwrite:
            shown = ", ".join(old[:3]) + (f", ... ({len(old)} folders)" if len(old) > 3 else "")
            raise MonitorError(f"{root}: already holds a monitor run ({shown}); a new run would mix its steps with the "
                               'old ones: pass --overwrite (or set "overwrite": true in the monitor config) to replace '
                               f"it, or choose another folder ({WHERE})")
        try:
            for name in old:
                shutil.rmtree(root / name)
        except OSError as exc:
            raise MonitorError(f"{exc.filename or root}: cannot remove the earlier monitor run "
                               f"({exc.strerror or exc}); remove it yourself, or choose another folder "
                               f"({WHERE})") from None
    lock = RunLock(root, overwrite)
    lock.acquire()
    name = folder_name(rank)
    try:
        folder = safe_dir(root, name)
        probe_file = folder / ".probe-write-test"
        probe_file.write_text("")
        probe_file.unlink()
    except BaseException as exc:
        lock.release()
        if isinstance(exc, OSError):
            raise MonitorError(f"{root / name}: cannot write the monitor output ({exc.strerror or exc}); "
                               f"pass a writable folder ({WHERE})") from None
        raise
    return folder, lock
