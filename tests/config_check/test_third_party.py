"""The example third-party checker (git_commit) is collected and compared like a built-in one."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.config_check.conftest import run_probe


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


@pytest.fixture()
def repo(tmp_path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.sh").write_text("python train.py --lr 0.1\n")
    _git(folder, "init", "-q")
    _git(folder, "add", ".")
    _git(folder, "commit", "-q", "-m", "first")
    return folder


def _collect(repo: Path, out: Path, site: Path, *extra: str) -> dict:
    done = run_probe("check", "collect", "-d", repo / "train.sh", "-o", out, *extra, pythonpath=[site], cwd=repo)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_example_checker_is_packed_and_compared(repo, tmp_path, example_site):
    bench = _collect(repo, tmp_path / "a.zip", example_site)
    assert "rank0/git_commit.json" in bench
    manifest = json.loads(bench["manifest.json"])
    assert manifest["checkers"]["git_commit"]["distribution"] == "probe-example-checker"
    (repo / "train.sh").write_text("python train.py --lr 0.2\n")
    _git(repo, "commit", "-q", "-am", "second")
    _collect(repo, tmp_path / "b.zip", example_site)
    done = run_probe("check", "compare", tmp_path / "a.zip", tmp_path / "b.zip", "-o", tmp_path / "out",
                     pythonpath=[example_site])
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["checkers"]
    assert list(summary) == ["env", "pip", "hyperparameters", "git_commit"]
    assert [d["item"] for d in summary["git_commit"]["differences"]] == ["commits"]
    assert [d["item"] for d in summary["hyperparameters"]["differences"]] == ["learning_rate"]


def test_disabled_checker_leaves_packs_and_results(repo, tmp_path, example_site):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["git_commit"]}}))
    pack = _collect(repo, tmp_path / "a.zip", example_site, "-c", config)
    assert "rank0/git_commit.json" not in pack and "git_commit" not in json.loads(pack["manifest.json"])["checkers"]
    # a pack that does hold git_commit data: disabling the checker drops it from the results too
    _collect(repo, tmp_path / "b.zip", example_site)
    done = run_probe("check", "compare", tmp_path / "a.zip", tmp_path / "b.zip", "-o", tmp_path / "out",
                     "-c", config, pythonpath=[example_site])
    assert done.returncode == 0, done.stderr
    assert "git_commit" in done.stderr and "left out" in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["checkers"]
    assert "git_commit" not in summary and summary["env"]["status"] == "pass"


def test_without_the_plugin_installed_its_data_is_left_out(repo, tmp_path, example_site):
    _collect(repo, tmp_path / "a.zip", example_site)
    done = run_probe("check", "compare", tmp_path / "a.zip", tmp_path / "a.zip", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["checkers"]
    assert "git_commit" not in summary and set(summary) == {"env", "pip", "hyperparameters"}
