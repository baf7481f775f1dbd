"""The config_check pack: one zip per environment, one JSON file per checker and rank.

Layout::

    manifest.json            {"format": "probe-config-check", "version": 2, "checkers": {...}, "ranks": [...]}
    rank0/env.json           what checker ``env`` collected on rank 0
    rank0/weights.json
    rank1/...
    env, pip, hyperparameters/..., weights/step0/rank0/weight.json, ...   the same data in msprobe's layout

The pack holds whatever the checkers return; it knows no checker by name,
except that the built-in ones are also written in msprobe's layout
(:mod:`probe_config_check.msprobe_layout`), so msprobe's ``config_check -c``
reads probe's packs. A zip without probe's manifest but with msprobe's
members is read as an msprobe pack. Version 2 records weights per step;
version 1 packs (one weights snapshot) are still read.
Several ranks of one job can write into one pack: each rank keeps its files
in a staging folder next to the zip, and the zip is rebuilt from all of them
under a file lock.
"""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from probe_core.api import CheckError, loads, OutputError, prepare_output_dir, replaced_whole, writing

from probe_config_check import msprobe_layout
from probe_config_check.safezip import checked_members, open_zip, read_member

FORMAT = "probe-config-check"
VERSION = 2
MANIFEST = "manifest.json"
_MEMBER = re.compile(r"^rank(\d+)/([A-Za-z0-9_.-]+)\.json$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
MAX_MEMBER_DEPTH = 64  # checkers' data nests a few levels; deeper is not a pack (and would exhaust recursion)

#: rank -> checker name -> collected JSON data
PackData = dict[int, dict[str, Any]]


def to_json(data: Any) -> str:
    """JSON text for collected data; values JSON cannot hold become strings."""
    return json.dumps(data, indent=1, sort_keys=True, default=str, allow_nan=True)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise CheckError(f"checker name {name!r} cannot be a file name in a pack; "
                         "use letters, digits, '_', '-' or '.'")
    return name


def check_pack_path(path: str | os.PathLike[str], flag: str = "output_zip_path") -> Path:
    """``path`` as the zip to write, checked before any work: not a folder or symbolic link, in a folder that
    can be created and written (one :class:`~probe_core.outputs.OutputError` line otherwise)."""
    path = Path(path)
    if path.is_symlink():
        raise OutputError(f"{flag} {path}: is a symbolic link; give the path of the zip file itself")
    if path.is_dir():
        raise OutputError(f"{flag} {path}: is a folder; give the path of the zip file to write "
                          f"(e.g. {path / 'pack.zip'})")
    prepare_output_dir(path.parent, flag=f"{flag} {path}: folder")
    return path


def write_pack(path: str | os.PathLike[str], data: PackData, checkers: Mapping[str, Mapping[str, str]],
               *, flag: str = "output_zip_path") -> Path:
    """Write ``data`` as a pack at ``path`` (atomically replaced); ``checkers`` describes each checker."""
    path = check_pack_path(path, flag)
    manifest = {"format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "ranks": sorted(data), "checkers": dict(sorted(checkers.items()))}
    with writing(f"the pack {path}"), replaced_whole(path) as tmp, \
            zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest, indent=1))
        for rank in sorted(data):
            for name, value in sorted(data[rank].items()):
                archive.writestr(f"rank{int(rank)}/{check_name(name)}.json", to_json(value))
        for name, text in sorted(msprobe_layout.to_members(data).items()):
            archive.writestr(name, text)
    return path


def read_pack(path: str | os.PathLike[str],
              options: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], PackData]:
    """(manifest, rank -> checker -> data) of a pack of probe or of msprobe, every member checked before it
    is read; ``options`` (config.json's ``config_check``) filter an msprobe pack as probe's collection would."""
    with open_zip(path) as archive:
        members = checked_members(archive, path)
        manifest: dict[str, Any] | None = None
        data: PackData = {}
        theirs: dict[str, bytes] = {}
        for info, rel in members:
            name = rel.as_posix()
            if name == MANIFEST:
                manifest = _load(path, name, read_member(archive, info, path))
            elif match := _MEMBER.match(name):
                data.setdefault(int(match.group(1)), {})[match.group(2)] = _load(
                    path, name, read_member(archive, info, path))
            elif msprobe_layout.is_member(name):
                theirs[name] = read_member(archive, info, path)
    if manifest is None and not data and theirs:
        data = msprobe_layout.from_members(path, theirs, options)
        return {"format": "msprobe", "ranks": sorted(data), "checkers": {}}, data
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckError(f"{path}: no probe config_check manifest ({MANIFEST} with \"format\": \"{FORMAT}\") and "
                         "no msprobe config_check members (env, pip, hyperparameters/, weights/, dataset/, random/); "
                         "pass a pack written by probe check collect, ConfigChecker or msprobe config_check")
    version = manifest.get("version", 0)
    if type(version) is not int or version < 1:
        raise CheckError(f"{path}: {MANIFEST}: key \"version\" is {_short(version)}, not a pack format version "
                         "(a positive integer); re-collect the pack")
    if version > VERSION:
        raise CheckError(f"{path}: pack format version {version} is newer than this probe "
                         f"understands ({VERSION}); upgrade probe")
    for key, kind in (("checkers", dict), ("ranks", list)):
        if key in manifest and not isinstance(manifest[key], kind):
            raise CheckError(f"{path}: {MANIFEST}: key \"{key}\" is {_short(manifest[key])}, not "
                             f"{'an object' if kind is dict else 'a list'}; re-collect the pack")
    for rank, checkers in data.items():
        for name, value in checkers.items():
            if not isinstance(value, dict):
                raise CheckError(f"{path}: member rank{rank}/{name}.json holds {type(value).__name__}, not an object "
                                 "of collected data; re-collect the pack")
    return manifest, data


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _load(path: Any, member: str, raw: bytes) -> Any:
    """One member's JSON: UTF-8, no deeper than packs nest (every failure is one CheckError)."""
    try:
        return loads(raw, max_depth=MAX_MEMBER_DEPTH)
    except ValueError as exc:
        raise CheckError(f"{path}: member {member} is not usable JSON ({exc}); re-collect the pack") from None


# -- several ranks, one pack ------------------------------------------------------


def staging_dir(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.parent / f".{path.name}.parts"


@contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no cross-process lock
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_rank(path: str | os.PathLike[str], rank: int, collected: Mapping[str, Any],
               checkers: Mapping[str, Mapping[str, str]], *, world_size: int = 1, fresh: bool = False) -> Path:
    """Store one rank's data in the staging folder, then rebuild the pack from every rank's files.

    ``fresh`` drops what this rank staged in an earlier run; ranks at or above
    ``world_size`` (left over from a bigger earlier job) are not packed.
    """
    stage = staging_dir(path)
    world_size = max(world_size, rank + 1)
    with writing(f"rank {rank}'s part of the pack {path} (in {stage})"), _locked(stage):
        folder = stage / f"rank{int(rank)}"
        folder.mkdir(exist_ok=True)
        if fresh:
            for old in folder.glob("*.json"):
                old.unlink()
        for name, value in collected.items():
            tmp = folder / f".{check_name(name)}.json.tmp"
            tmp.write_text(to_json(value), encoding="utf-8")
            os.replace(tmp, folder / f"{name}.json")
        (stage / f"checkers.rank{int(rank)}.json").write_text(json.dumps(dict(checkers)), encoding="utf-8")
        data: PackData = {}
        described: dict[str, Mapping[str, str]] = {}
        for rank_dir in sorted(stage.glob("rank*")):
            if not rank_dir.name[4:].isdigit() or rank_dir.is_symlink() or int(rank_dir.name[4:]) >= world_size:
                continue
            for file in sorted(rank_dir.glob("*.json")):
                data.setdefault(int(rank_dir.name[4:]), {})[file.stem] = json.loads(file.read_text(encoding="utf-8"))
        for file in sorted(stage.glob("checkers.rank*.json")):
            described.update(json.loads(file.read_text(encoding="utf-8")))
        return write_pack(path, data, described)
