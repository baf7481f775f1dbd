"""Issue 32, item 6: a NaN or Inf on one side only is always a finding, under the default ``--rules noise`` as
under msprobe's, and the first-divergence answer names it: on the columnar path and on the row path alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.compare.dumps import tiny_model_entries, write_dump
from tests.compare.helpers import read_csv, read_summary, result_csv, run_probe
from tests.compare.test_columnar import RowPath, Spy, _run


def _pair(tmp_path: Path, side: str, entry: int, section: str, stat: str, value: float) -> tuple[Path, Path]:
    """The tiny model on both sides, with ``stat`` of the first tensor of ``section`` of entry number ``entry``
    set to ``value`` on ``side`` only."""
    folders = {name: write_dump(tmp_path / name / "step0" / "rank0", tiny_model_entries()) for name in ("t", "b")}
    path = folders[side] / "dump.json"
    dump = json.loads(path.read_text())
    name = list(dump["data"])[entry]
    dump["data"][name][section][0][stat] = value
    path.write_text(json.dumps(dump, indent=1))
    return folders["t"], folders["b"]


def _both_paths(target: Path, bench: Path, out: Path) -> dict:
    """The summary, after checking that the row path and the columnar path write the same CSV and summary."""
    rows = _run(target, bench, out / "rows", RowPath)
    columns = _run(target, bench, out / "columns", Spy)
    assert columns == rows
    return json.loads((out / "columns" / "summary.json").read_text())


CASES = [  # (side, entry, section, statistic, value, the row named)
    ("t", 0, "input_args", "Max", float("nan"), "input.0"),   # the first API's input, the case
    ("b", 0, "input_args", "Norm", float("inf"), "input.0"),  # on the bench side
    ("t", 2, "output", "Min", -float("inf"), "output.0"),     # an output mid-model
]


@pytest.mark.parametrize("side,entry,section,stat,value,row", CASES)
def test_a_nan_or_inf_on_one_side_is_the_first_divergence_on_both_paths(tmp_path, side, entry, section, stat,
                                                                         value, row):
    target, bench = _pair(tmp_path, side, entry, section, stat, value)
    summary = _both_paths(target, bench, tmp_path / "out")
    first = summary["first_divergence"]
    name = json.loads((target / "dump.json").read_text())["data"]
    name = list(name)[entry]
    assert first is not None and first["name"] == name and first["kind"] == "nan/inf", first
    who = "target" if side == "t" else "bench"
    assert first["reason"].startswith(f"{row}: {stat} ") and f"NaN/Inf in the {who} only" in first["reason"]
    assert summary["counts"]["error"] >= 1
    csv = read_csv(Path(summary["ranks"][0]["csv"]))
    marked = {r["NPU Name"] for r in csv if r["Result"] == "error"}
    assert f"{name}.{row}" in marked


def test_nan_on_both_sides_is_no_finding(tmp_path):
    target, bench = _pair(tmp_path, "t", 0, "input_args", "Max", float("nan"))
    dump = json.loads((target / "dump.json").read_text())
    (bench / "dump.json").write_text(json.dumps(dump, indent=1))
    assert _both_paths(target, bench, tmp_path / "out")["first_divergence"] is None


def test_the_earliest_nan_is_named_when_it_flows_on(tmp_path):
    """relu's output is NaN in the target, so are the inputs of what reads it: relu, where it was made, is named."""
    entries = [list(e) for e in tiny_model_entries()]
    broken = [list(e) for e in entries]
    nan = np.full_like(entries[2][3][0], np.nan)
    broken[2][3] = [nan]     # Functional.relu.0.forward's output
    broken[3][3] = [nan]     # Module.act.ReLU.forward.0's output
    broken[4][2][0] = nan    # Functional.linear.1.forward's input
    target = write_dump(tmp_path / "t" / "step0" / "rank0", [tuple(e) for e in broken])
    bench = write_dump(tmp_path / "b" / "step0" / "rank0", [tuple(e) for e in entries])
    summary = _both_paths(target, bench, tmp_path / "out")
    assert summary["first_divergence"]["name"] == "Functional.relu.0.forward"
    assert summary["first_divergence"]["kind"] == "nan/inf"


def test_the_cli_names_the_nan_under_the_default_rules(tmp_path):
    target, bench = _pair(tmp_path, "t", 0, "input_args", "Max", float("nan"))
    done = run_probe("compare", target, bench, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "First divergence (step 0, rank 0): Functional.linear.0.forward" in text
    assert "NaN/Inf in the target only" in text and "No divergent entry" not in text
    assert read_summary(tmp_path / "out")["rules"] == "noise"
    rows = {r["NPU Name"]: r for r in read_csv(result_csv(tmp_path / "out"))}
    assert rows["Functional.linear.0.forward.input.0"]["Result"] == "error"
    assert "NaN/Inf in the target only" in rows["Functional.linear.0.forward.input.0"]["Err_message"]
