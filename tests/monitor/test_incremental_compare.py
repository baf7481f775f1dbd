"""``probe monitor compare --summary-only --incremental`` on real monitor outputs as they grow step by step: the same
summary.json as a full compare at every step, and a state that does not fit the outputs is never reused silently."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from probe_monitor.compare.reader import FILE
from tests.monitor.helpers import monitor_here, probe, probe_here, rank_dir, write_config

STEPS = 6


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The same script monitored plainly, and with a bug scaling fc2's gradient by 1.01 at every step (noise under
    ``--rtol 0.05``) plus a loss spike at step 4; once one file per step (the default), once 4 steps per file."""
    root = tmp_path_factory.mktemp("grow")
    window = write_config(root / "window.json", wg_distribution=True, param_distribution=True,
                          mv_distribution=True, step_count_per_record=4)
    for suffix, config in (("", None), ("_window", window)):
        monitor_here(f"base{suffix}", "--steps", str(STEPS), cwd=root, config=config)
        monitor_here(f"noisy{suffix}", "--steps", str(STEPS), "--scale-grad-of", "fc2", "--spike-step", "4",
                     cwd=root, config=config)
    return root


def grow(source: Path, copy: Path, step: int) -> None:
    """``copy``: the monitor output ``source`` as its writer had left it after ``step`` (files renamed as they grow,
    the rows of steps up to ``step``, byte for byte)."""
    folder = rank_dir(source)
    into = copy / folder.name
    into.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("*.csv")):
        match = FILE.match(path.name)
        if int(match["first"]) > step:
            continue
        lines = path.read_bytes().splitlines(keepends=True)
        column = next(csv.reader([lines[0].decode()])).index("step")
        kept = [lines[0], *(line for line in lines[1:] if int(next(csv.reader([line.decode()]))[column]) <= step)]
        new = into / f"{match['tag']}_{match['first']}-{min(int(match['last']), step)}.csv"
        if new.exists() and new.read_bytes() == b"".join(kept):
            continue  # a file the writer no longer touches
        for old in into.glob(f"{match['tag']}_{match['first']}-*.csv"):
            old.unlink()
        new.write_bytes(b"".join(kept))


def summary(root: Path, out: str, *args: str) -> dict:
    assert probe_here("monitor", "compare", *args, "-o", out, "--summary-only", cwd=root) == 0
    return json.loads((root / out / "summary.json").read_text())


def full_and_incremental(root: Path, target: str, bench: str, out: str, *options: str) -> tuple[dict, dict]:
    full = summary(root, f"{out}_full", target, bench, *options)
    shutil.rmtree(root / f"{out}_full")
    incremental = summary(root, out, target, bench, *options, "--incremental")
    return full, incremental


@pytest.mark.parametrize("suffix", ["", "_window"])
@pytest.mark.parametrize("parallel", [True, False], ids=["both-growing", "bench-finished"])
def test_each_step_judged_alone_gives_the_full_compare(runs, tmp_path, suffix, parallel):
    shutil.copytree(runs, tmp_path, dirs_exist_ok=True)
    if not parallel:
        shutil.copytree(runs / f"base{suffix}", tmp_path / "bench")
    firsts = []
    for step in range(STEPS):
        grow(runs / f"noisy{suffix}", tmp_path / "target", step)
        if parallel:
            grow(runs / f"base{suffix}", tmp_path / "bench", step)
        full, incremental = full_and_incremental(tmp_path, "target", "bench", "check", "--rtol", "0.05")
        judged = incremental.pop("incremental")
        if suffix:  # a growing file's new values may take more decimals: its rounding changes, and it starts over
            assert judged["judged"][1] == step
            assert judged["started_over"] is None or "written with more decimals" in judged["started_over"]
        else:  # one file per step: each call reads the new step alone
            assert judged == {"state": "check/incremental_state.json", "judged": [step, step], "started_over": None}
        if parallel:  # both hold the same steps: the whole summary is the full compare's
            assert incremental == full, step
        else:  # the bench's later steps are the calls after's; the verdict is the full compare's
            assert incremental["first_divergence"] == full["first_divergence"], step
            assert incremental["rows"] == full["rows"] and incremental["steps"] == [0, step]
        firsts.append(incremental["first_divergence"] and incremental["first_divergence"]["step"])
    assert firsts == [None] * 4 + [4, 4]  # the 1.01 bug stays in its noise; the spike parts
    if not suffix:  # the files judged whole are a digest in the state: one cursor a quantity, however many steps
        state = json.loads((tmp_path / "check" / "incremental_state.json").read_text())
        tags = {FILE.match(path.name)["tag"] for path in (tmp_path / "target").glob("*/*.csv")}
        assert sorted(FILE.match(name)["tag"] for name in state["folders"]["a"]["0"]["open"]) == sorted(tags)
    assert full["first_divergence"]["noise"] > 0.005  # the threshold came from the earlier steps' noise


def test_state_of_other_outputs_or_of_a_changed_file_is_not_reused(runs, tmp_path):
    shutil.copytree(runs, tmp_path, dirs_exist_ok=True)
    for step in range(3):
        grow(runs / "noisy", tmp_path / "target", step)
        summary(tmp_path, "check", "target", "base", "--rtol", "0.05", "--incremental")

    other = summary(tmp_path, "check", "noisy", "base", "--rtol", "0.05", "--incremental")
    assert "was made for other inputs (a, folders differ)" in other["incremental"]["started_over"]
    assert other["incremental"]["judged"] == [0, STEPS - 1]
    assert other["first_divergence"] == summary(tmp_path, "full", "noisy", "base", "--rtol", "0.05")[
        "first_divergence"]

    summary(tmp_path, "check", "target", "base", "--rtol", "0.05", "--incremental")  # back to steps 0-2
    judged = next((tmp_path / "target").glob("*/grad_reduced_1-1.csv"))
    text = judged.read_text()
    value = text.splitlines()[1].split(",")[3]
    judged.write_text(text.replace(value, value[:-1] + ("1" if value[-1] != "1" else "2"), 1))
    grow(runs / "noisy", tmp_path / "target", 3)
    changed = summary(tmp_path, "check", "target", "base", "--rtol", "0.05", "--incremental")
    assert changed["incremental"]["started_over"] == (f"{judged.parent.relative_to(tmp_path)}: the grad_reduced files "
                                                      "of steps before 2 changed since they were judged (one gone, "
                                                      "new or rewritten)")
    assert changed["incremental"]["judged"] == [0, 3]
    full = summary(tmp_path, "full", "target", "base", "--rtol", "0.05")
    assert changed["rows"] == full["rows"] and changed["first_divergence"] == full["first_divergence"]


def test_incremental_needs_summary_only(runs, tmp_path):
    done = probe("monitor", "compare", "noisy", "base", "-o", tmp_path / "out", "--incremental", cwd=runs,
                 check=False)
    assert done.returncode == 2 and "--incremental keeps only what summary.json needs; add --summary-only" in \
        done.stderr
    assert not (tmp_path / "out").exists()
