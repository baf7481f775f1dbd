"""Issue 32, items 1 and 3: ``probe check collect``/``compare`` on hostile configs and unwritable or full outputs.

* a YAML "billion laughs" (ten lines that grow past 2 GB when walked), a recursive alias, deep nesting and a
  config file over 64 MiB are one line naming the file, exit 2, in seconds;
* an ``-o`` that cannot be written is refused before any work; a full disk mid-way is one line, and the pack
  or results are never left half-written under their real names.

Tests run as root here, which ignores permission bits: "cannot be written" is made real with a path under a
regular file (no folder can be created there, whoever you are); the read-only folder test runs only as a
normal user. A full disk is a file-size limit in the child (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored), so writes
fail with ``EFBIG`` as on a full disk.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from tests.robustness.helpers import MANIFEST, PROBE, assert_clean_error, env, run_probe, zip_members

#: nine aliases of nine aliases ... nine levels deep: 9**9 (387 million) strings once expanded
LAUGHS = 'lol: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"l{i}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def _collect(tmp_path: Path, name: str, text: str | bytes) -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return run_probe("check", "collect", "-d", path, "-o", tmp_path / "pack.zip", timeout=120)


@pytest.mark.parametrize(("text", "needles"), [
    (LAUGHS, ["aliases expand to more than 1,000,000 values", "key 'l5', line 7"]),
    ("a: &x\n  b: [1, *x]\n", ["(key 'a', line 1) contains an alias to itself"]),
    ("x: " + "[" * 3000 + "]" * 3000 + "\n", ["nested deeper than 100 levels"]),
    ("x: !!int " + "9" * 5000 + "\n", ["holds a value YAML cannot build", "Exceeds the limit (4300 digits)"]),
    ("lr: [1, 2\n", ["not valid YAML at line 2"]),
], ids=["billion laughs", "recursive alias", "deep nesting", "huge integer", "broken"])
def test_hostile_yaml_is_one_line_in_seconds(tmp_path, text, needles):
    start = time.monotonic()
    result = _collect(tmp_path, "config.yaml", text)
    assert time.monotonic() - start < 60
    assert_clean_error(result, str(tmp_path / "config.yaml"), *needles)
    assert not (tmp_path / "pack.zip").exists()


def test_aliases_within_bounds_still_read(tmp_path):
    text = "base: &b {lr: 0.001, seed: 7}\ntrain: *b\nlist: &l [1, 2]\nmore: [*l, *l]\n"
    assert _collect(tmp_path, "config.yaml", text).returncode == 0
    with zipfile.ZipFile(tmp_path / "pack.zip") as archive:
        params = json.loads(archive.read("rank0/hyperparameters.json"))["parameters"]
    assert params["learning_rate"]["value"] == 0.001 and params["seed"]["value"] == 7
    assert params["more"]["value"] == [[1, 2], [1, 2]]


@pytest.mark.parametrize("name", ["big.yaml", "big.json", "train.sh"])
def test_a_config_over_64_mib_is_refused_unread(tmp_path, name):
    path = tmp_path / name
    with open(path, "wb") as handle:
        handle.truncate((64 << 20) + 4096)  # sparse: refused from its size, never read
    result = run_probe("check", "collect", "-d", path, "-o", tmp_path / "pack.zip", timeout=120)
    assert_clean_error(result, str(path), f"is {(64 << 20) + 4096:,} bytes, over the 64 MiB cap")


# -- outputs --------------------------------------------------------------------------------------


def _pack(tmp_path: Path, name: str = "bench.zip") -> Path:
    result = run_probe("check", "collect", "-o", tmp_path / name, timeout=120)
    assert result.returncode == 0, result.stderr
    return tmp_path / name


def test_collect_refuses_unwritable_outputs_before_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.zip").symlink_to(tmp_path / "elsewhere.zip")
    cases = {blocker / "pack.zip": "folder " + f"{blocker}: exists and is not a folder",
             blocker / "sub" / "pack.zip": f"{blocker} is a file, so the folder cannot be created",
             tmp_path / "folder": "is a folder; give the path of the zip file",
             tmp_path / "link.zip": "is a symbolic link"}
    for out, needle in cases.items():
        assert_clean_error(run_probe("check", "collect", "-o", out, timeout=120), f"-o {out}", needle)
    assert not (tmp_path / "elsewhere.zip").exists()


def test_compare_refuses_unwritable_outputs_before_work(tmp_path):
    bench = _pack(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert_clean_error(run_probe("check", "compare", bench, bench, "-o", blocker, timeout=120),
                       f"-o {blocker}", "exists and is not a folder")
    assert_clean_error(run_probe("check", "compare", bench, bench, "-o", blocker / "out", timeout=120),
                       "is a file, so the folder cannot be created")
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert_clean_error(run_probe("check", "collect", "-o", folder / "pack.zip", timeout=120), "not writable")
    finally:
        folder.chmod(0o700)


def _limited(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def _run_full_disk(*args: object, limit: int) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, env=env(), timeout=120,
                          preexec_fn=_limited(limit))


def test_full_disk_in_collect_keeps_the_old_pack_whole(tmp_path):
    old = _pack(tmp_path, "pack.zip")
    before = old.read_bytes()
    result = _run_full_disk("check", "collect", "-o", old, limit=2048)
    assert_clean_error(result, f"writing the pack {old}", "the disk is full", "nothing was written completely")
    assert old.read_bytes() == before  # the earlier pack, whole: the new one never took its name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack.zip"]  # no temporary file left behind


def test_full_disk_in_collect_leaves_no_pack(tmp_path):
    result = _run_full_disk("check", "collect", "-o", tmp_path / "new.zip", limit=2048)
    assert_clean_error(result, "the disk is full")
    assert list(tmp_path.iterdir()) == []


def test_full_disk_in_compare_is_one_line_and_no_half_results(tmp_path):
    env_member = ("rank0/env.json", b'{"variables": {"OMP_NUM_THREADS": "1"}}')
    bench = zip_members(tmp_path / "bench.zip", [("manifest.json", MANIFEST), env_member])
    out = tmp_path / "out"
    result = _run_full_disk("check", "compare", bench, bench, "-o", out, limit=4096)  # any .xlsx is bigger
    assert_clean_error(result, f"writing the check results in {out}", "the disk is full",
                       "written completely: bench/, target/, summary.json")
    assert not (out / "result.xlsx").exists()
    assert sorted(p.name for p in out.iterdir()) == ["bench", "summary.json", "target"]  # no temporary file
