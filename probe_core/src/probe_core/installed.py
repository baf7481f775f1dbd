"""Installed distributions' versions and entry points, read from their ``*.dist-info``/``*.egg-info`` folders.

What every ``probe`` command needs of :mod:`importlib.metadata`, without importing it: its import pulls in the
email package and costs 60-80 ms of each command. Distributions are looked up as importlib.metadata does: in the
folders on ``sys.path``, the first one found of a name wins. A ``sys.path`` entry that is not a folder (a zip
archive) has the lookup left to importlib.metadata itself.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from probe_core.records import record


@record
class EntryPoint:
    """One entry point: ``name = value`` of ``group`` in ``distribution``'s ``entry_points.txt``."""

    name: str
    value: str  # "module" or "module:attribute.path"
    group: str
    distribution: str
    version: str

    def load(self) -> Any:
        """Import the module and return the object the entry point names."""
        module, _, attribute = self.value.partition(":")
        found: Any = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            found = getattr(found, part)
        return found


def normalized(name: str) -> str:
    """A distribution name as packaging compares them (``Probe_Torch`` and ``probe-torch`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None`` when it is not installed."""
    if _zips_on_path():
        return _metadata_version(distribution)
    wanted = normalized(distribution)
    for folder in _distribution_folders():
        if normalized(_folder_name(folder)) == wanted:
            return _headers(folder).get("Version", "")
    return None


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point of ``group``, from the first distribution of each name on ``sys.path``."""
    if _zips_on_path():
        return _metadata_entry_points(group)
    found, seen = [], set()
    for folder in _distribution_folders():
        name = normalized(_folder_name(folder))
        if name in seen:
            continue
        seen.add(name)
        try:
            with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as file:
                text = file.read()
        except OSError:
            continue
        pairs = _section(text, group) if f"[{group}]" in text else []
        if pairs:
            headers = _headers(folder)
            dist, dist_version = headers.get("Name", _folder_name(folder)), headers.get("Version", "")
            found += [EntryPoint(key, value, group, dist, dist_version) for key, value in pairs]
    return found


def _zips_on_path() -> bool:
    return any(entry and os.path.isfile(entry) for entry in sys.path)


def _distribution_folders() -> Iterator[str]:
    """The path of each ``*.dist-info``/``*.egg-info`` folder of each ``sys.path`` folder, in ``sys.path`` order
    (strings: a ``Path`` each costs more than the lookup)."""
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                yield os.path.join(entry or ".", name)


def _folder_name(folder: str) -> str:
    """The distribution name in ``name-version.dist-info`` (or ``name.egg-info``)."""
    return os.path.basename(folder).rsplit(".", 1)[0].split("-", 1)[0]


def _headers(folder: str) -> dict[str, str]:
    """The ``Name`` and ``Version`` of the folder's ``METADATA`` (``PKG-INFO`` for an egg)."""
    headers: dict[str, str] = {}
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, file), encoding="utf-8") as lines:
                for line in lines:
                    key, colon, value = line.partition(":")
                    if not line.strip() or not colon:
                        break
                    if key in ("Name", "Version"):
                        headers.setdefault(key, value.strip())
                        if len(headers) == 2:
                            break
            return headers
        except OSError:
            continue
    return headers


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each line of ``[group]`` in an ``entry_points.txt`` (extras in brackets dropped)."""
    pairs, inside = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            inside = line == f"[{group}]"
            continue
        key, equals, value = line.partition("=")
        if inside and equals:
            pairs.append((key.strip(), value.split("[", 1)[0].strip()))
    return pairs


def _metadata_version(distribution: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(distribution)
    except md.PackageNotFoundError:
        return None


def _metadata_entry_points(group: str) -> list[EntryPoint]:
    import importlib.metadata as md

    found = []
    for ep in md.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        found.append(EntryPoint(ep.name, ep.value, group, dist.metadata["Name"] if dist is not None else "?",
                                dist.version if dist is not None else "?"))
    return found
