"""Reading zip files that came from another machine without trusting them.

Every member is checked before anything is written: no absolute path, no
``..`` component, no drive letter or backslash trickery, no symlink or other
special file, no member (or total) larger than the limits. A member's size is
enforced again while it is decompressed, so a lying header cannot blow past
the limit. Files are created with ``O_EXCL | O_NOFOLLOW`` inside a folder the
caller owns, so nothing lands outside it.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from probe_core.api import CheckError

MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20


def _refuse(zip_path: str | os.PathLike[str], member: str, why: str) -> CheckError:
    return CheckError(f"{zip_path}: refusing to unpack member {member!r}: {why}; "
                      "the zip was not written by probe check collect or was tampered with — re-collect it")


def checked_members(archive: zipfile.ZipFile, zip_path: str | os.PathLike[str], *,
                    max_member_bytes: int = MAX_MEMBER_BYTES,
                    max_total_bytes: int = MAX_TOTAL_BYTES) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """Every file member with its safe relative path; raises :class:`CheckError` on the first bad one."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise CheckError(f"{zip_path}: {len(infos)} members is more than the {MAX_MEMBERS} allowed; not a probe pack")
    total = 0
    safe: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        key = name.rstrip("/")
        if key in seen:
            raise _refuse(zip_path, name, "the zip holds two members of that name (which one is real?); "
                          "msprobe appends to an existing zip: delete the old zip before collecting again")
        seen.add(key)
        mode = info.external_attr >> 16
        if not name:
            raise _refuse(zip_path, name, "its name is empty")  # found by the fuzzer
        if "\\" in name or "\x00" in name:
            raise _refuse(zip_path, name, "the name holds a backslash or NUL byte")
        path = PurePosixPath(name)
        if path.is_absolute() or name.startswith("/") or (path.parts and ":" in path.parts[0]):
            raise _refuse(zip_path, name, "it has an absolute path")
        if ".." in path.parts:
            raise _refuse(zip_path, name, "its path climbs out of the target folder ('..')")
        if stat.S_ISLNK(mode):
            raise _refuse(zip_path, name, "it is a symbolic link")
        if info.is_dir():
            continue
        if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
            raise _refuse(zip_path, name, "it is not a regular file")
        if info.file_size > max_member_bytes:
            raise _refuse(zip_path, name,
                          f"it unpacks to {info.file_size} bytes, over the {max_member_bytes}-byte limit")
        total += info.file_size
        if total > max_total_bytes:
            raise _refuse(zip_path, name, f"the members add up to more than the {max_total_bytes}-byte limit")
        safe.append((info, path))
    return safe


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, zip_path: str | os.PathLike[str],
                max_member_bytes: int = MAX_MEMBER_BYTES) -> bytes:
    """A member's bytes, stopping as soon as it grows past the limit (whatever its header claims)."""
    chunks, size = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > max_member_bytes:
                    raise _refuse(zip_path, info.filename,
                                  f"it unpacks to more than the {max_member_bytes}-byte limit")
                chunks.append(chunk)
    except CheckError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError, NotImplementedError) as exc:
        # a size or CRC that does not match the data, damaged compressed data, encryption, unknown compression
        raise _refuse(zip_path, info.filename, f"its data does not match its header ({type(exc).__name__}: {exc})"
                      ) from None
    if size != info.file_size:
        raise _refuse(zip_path, info.filename,
                      f"its header says {info.file_size} bytes but it unpacks to {size}")
    return b"".join(chunks)


def open_zip(zip_path: str | os.PathLike[str]) -> zipfile.ZipFile:
    """Open a pack, or a clear error naming it."""
    try:
        return zipfile.ZipFile(zip_path)
    except FileNotFoundError:
        raise CheckError(f"{zip_path}: file not found; pass a pack written by probe check collect") from None
    except (zipfile.BadZipFile, OSError, NotImplementedError, ValueError, EOFError, RuntimeError) as exc:
        # NotImplementedError: a zip version or feature Python cannot read (found by the fuzzer)
        raise CheckError(f"{zip_path}: not a readable zip file ({type(exc).__name__}: {exc}); "
                         "pass a pack written by probe check collect") from None


def safe_extract(zip_path: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                 max_member_bytes: int = MAX_MEMBER_BYTES,
                 max_total_bytes: int = MAX_TOTAL_BYTES) -> list[Path]:
    """Unpack ``zip_path`` into the new folder ``dest`` (which must not exist); return the files written."""
    dest = Path(dest)
    if dest.exists() or dest.is_symlink():
        raise CheckError(f"{dest}: already exists; unpack into a new folder")
    with open_zip(zip_path) as archive:
        members = checked_members(archive, zip_path, max_member_bytes=max_member_bytes,
                                  max_total_bytes=max_total_bytes)
        dest.mkdir(parents=True, exist_ok=False)
        root = dest.resolve()
        written = []
        for info, rel in members:
            data = read_member(archive, info, zip_path, max_member_bytes)
            target = root.joinpath(*rel.parts)
            if root not in target.parents:
                raise _refuse(zip_path, info.filename, "it resolves outside the target folder")
            _make_dirs(root, target.parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            written.append(target)
    return written


def _make_dirs(root: Path, folder: Path) -> None:
    """Create ``folder`` under ``root`` one level at a time, refusing any symlink on the way."""
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            raise CheckError(f"{current}: is a symbolic link inside the unpack folder; refusing to follow it")
        current.mkdir(exist_ok=True)
