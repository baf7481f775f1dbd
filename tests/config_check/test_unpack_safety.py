"""Packs come from other machines: a malicious zip is refused and nothing lands outside OUT."""

from __future__ import annotations

import json
import stat
import struct
import zipfile
from pathlib import Path

import pytest
from probe_config_check.pack import read_pack, write_pack
from probe_config_check.safezip import safe_extract
from probe_core.errors import CheckError

from tests.config_check.conftest import run_probe

MANIFEST = json.dumps({"format": "probe-config-check", "version": 1, "ranks": [0], "checkers": {}})


def _zip(path: Path, members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", MANIFEST)
        for info, data in members:
            archive.writestr(info, data)
    return path


def _symlink_member(name: str, points_to: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, points_to.encode()


def _forge_size(path: Path, member: str, size: int) -> Path:
    """Rewrite a member's uncompressed size in the central directory (a lying header)."""
    raw = bytearray(path.read_bytes())
    at = 0
    while (at := raw.find(b"PK\x01\x02", at)) != -1:
        name_len = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46: at + 46 + name_len].decode() == member:
            struct.pack_into("<I", raw, at + 24, size)
        at += 4
    path.write_bytes(bytes(raw))
    return path


@pytest.fixture()
def good_pack(tmp_path) -> Path:
    return write_pack(tmp_path / "good.zip", {0: {"env": {"variables": {"OMP_NUM_THREADS": "1"}}}},
                      {"env": {"plugin": "config_check", "distribution": "", "description": ""}})


def _bad_zips(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    escape = tmp_path / "escaped.txt"
    absolute = tmp_path / "absolute.txt"
    bad = {
        "dotdot": (_zip(tmp_path / "dotdot.zip", [("rank0/../../escaped.txt", b"x")]), "'..'"),
        "absolute": (_zip(tmp_path / "absolute.zip", [(str(absolute), b"x")]), "absolute path"),
        "symlink": (_zip(tmp_path / "symlink.zip", [_symlink_member("rank0/env.json", str(escape))]),
                    "symbolic link"),
        "oversized": (_forge_size(_zip(tmp_path / "oversized.zip", [("rank0/env.json", b"{}")]),
                                  "rank0/env.json", 0x7FFFFFF0), "byte limit"),
    }
    return bad


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "oversized"])
def test_cli_refuses_malicious_pack_and_writes_nothing_outside_out(tmp_path, good_pack, kind):
    bad, why = _bad_zips(tmp_path)[kind]
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "out"
    for order in ((bad, good_pack), (good_pack, bad)):
        done = run_probe("check", "compare", *order, "-o", out)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "refusing to unpack" in done.stderr and why in done.stderr
        assert "Traceback" not in done.stderr
    after = sorted(p.name for p in tmp_path.iterdir())
    assert set(after) - set(before) <= {"out"}
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "absolute.txt").exists()
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert all(out in p.parents for p in written)
    assert not any(p.is_symlink() for p in out.rglob("*")) if out.exists() else True


def test_real_oversized_member_is_stopped_while_reading(tmp_path):
    """The limit holds even when the sizes are honest: a member larger than the limit is refused."""
    pack = _zip(tmp_path / "big.zip", [("rank0/env.json", b"0" * 5000)])
    with pytest.raises(CheckError, match="byte limit"):
        safe_extract(pack, tmp_path / "dest", max_member_bytes=1000)
    assert not (tmp_path / "dest").exists()


def test_not_a_zip_is_a_clear_error(tmp_path, good_pack):
    junk = tmp_path / "junk.zip"
    junk.write_text("not a zip")
    done = run_probe("check", "compare", junk, good_pack, "-o", tmp_path / "out")
    assert done.returncode == 2 and "not a readable zip file" in done.stderr


def test_zip_without_manifest_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as archive:
        archive.writestr("rank0/env.json", "{}")
    with pytest.raises(CheckError, match="no probe config_check manifest .* and no msprobe config_check members"):
        read_pack(tmp_path / "plain.zip")


def test_good_pack_round_trips(good_pack, tmp_path):
    manifest, data = read_pack(good_pack)
    assert manifest["ranks"] == [0] and data == {0: {"env": {"variables": {"OMP_NUM_THREADS": "1"}}}}
    files = safe_extract(good_pack, tmp_path / "x")
    assert sorted(p.relative_to((tmp_path / "x").resolve()).as_posix() for p in files) == [
        "env", "manifest.json", "rank0/env.json"]  # env: the same data in msprobe's layout
