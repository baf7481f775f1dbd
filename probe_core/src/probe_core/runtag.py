"""msprobe's run time tags, ``Nov28_10-31-05`` (``%b%d_%H-%M-%S`` in English whatever the locale): the monitor
names its run folders ``{tag}-rank{R}-{id}``, and readers choose the newest run of a rank by them.

The tag has no year, so a December run sorts after a January one by name; :func:`tag_started` reads the
year from the folder's modification time (the run wrote it at or after its start): the tag's day is in the
year of that time, or in the year before when it falls after it (a run started on 31 December, still
writing on 2 January)."""

from __future__ import annotations

import re
import time
from pathlib import Path

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: a tag at the start of a name: its month, day and clock
TAG = re.compile(r"^(?P<month>[A-Z][a-z]{2})(?P<day>\d{2})_(?P<clock>\d{2}-\d{2}-\d{2})")


def time_tag(now: float | None = None) -> str:
    """The tag of ``now`` (default: this moment), local time."""
    t = time.localtime(now)
    return f"{MONTHS[t.tm_mon - 1]}{t.tm_mday:02d}_{t.tm_hour:02d}-{t.tm_min:02d}-{t.tm_sec:02d}"


def tag_started(folder: Path) -> tuple:
    """Sort key of a folder whose name starts with a tag: when its run started (year, month, day, clock), the
    name last; a name without a tag sorts first."""
    match = TAG.match(folder.name)
    if match is None or match["month"] not in MONTHS:
        return (-1, 0, 0, "", folder.name)
    month, day = MONTHS.index(match["month"]) + 1, int(match["day"])
    try:
        written = time.localtime(folder.stat().st_mtime)
    except OSError:
        year = 0
    else:
        year = written.tm_year - ((month, day) > (written.tm_mon, written.tm_mday))
    return (year, month, day, match["clock"], folder.name)
