"""The monitor output's folder names: msprobe's ``{time}-rank{R}-{id}/`` (what the monitor writes) and earlier
probe versions' ``rank{R}/`` (still read).

msprobe's tools find a rank's folder by its name alone: ``csv2tensorboard_by_step`` and ``data2db --format
monitor`` take ``{time}-rank{R}-`` folders whose time tag reads as ``%b%d_%H-%M-%S`` (``Mar05_14-03-59``) and
skip every other folder, so the monitor writes that name: the local time the monitor started, the rank, and
8 hex digits of a random id (as msprobe's ``TrainerMon``).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from probe_core.api import MONTHS, tag_started, time_tag

MSPROBE_DIR = re.compile(r"^(?P<month>[A-Z][a-z]{2})(?P<day>\d{2})_(?P<clock>\d{2}-\d{2}-\d{2})-rank(?P<rank>\d{1,5})-"
                         r"(?P<id>\w+)$")
PROBE_DIR = re.compile(r"^rank(?P<rank>\d+)$")
MSPROBE_LAYOUT = "msprobe's layout ({time}-rank{R}-{id}/)"
PROBE_LAYOUT = "probe's earlier layout (rank{R}/)"


def folder_name(rank: int, now: float | None = None) -> str:
    """``{time}-rank{rank}-{id}``, the time in msprobe's format (English month names whatever the locale)."""
    return f"{time_tag(now)}-rank{rank}-{uuid.uuid4().hex[:8]}"


def rank_of(name: str) -> int | None:
    """The rank a folder name says (either layout), else ``None``."""
    match = MSPROBE_DIR.match(name) or PROBE_DIR.match(name)
    if match is None or (match.re is MSPROBE_DIR and match["month"] not in MONTHS):
        return None
    return int(match["rank"])


def layout_of(names: list[str]) -> str:
    """Which layout folder names are in: msprobe's, probe's old one, or ``""`` (neither: one folder passed)."""
    if any(MSPROBE_DIR.match(n) for n in names):
        return MSPROBE_LAYOUT
    return PROBE_LAYOUT if any(PROBE_DIR.match(n) for n in names) else ""


def run_folders(root: Path) -> dict[int, list[Path]]:
    """``{rank: [its folders, oldest first]}`` among the folders of ``root`` named in either layout (links to
    folders included: the caller refuses them)."""
    found: dict[int, list[Path]] = {}
    if not root.is_dir():
        return found
    for child in root.iterdir():
        rank = rank_of(child.name)
        if rank is not None and child.is_dir():
            found.setdefault(rank, []).append(child)
    return {rank: sorted(folders, key=tag_started) for rank, folders in sorted(found.items())}
