"""``probe overflow-check`` on real two-rank gloo runs collected by ``probe run`` (issue 16's acceptance)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.overflow_check.dist_runs import BIN, two_rank_dump


def overflow_check(dump: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "probe"), "overflow-check", "-i", str(dump), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))


def report_of(out: Path) -> dict:
    files = sorted(out.glob("anomaly_analyze_*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text(encoding="utf-8"))


@pytest.mark.slow
def test_rank_1_overflows_before_the_all_reduce(tmp_path_factory, tmp_path):
    done = overflow_check(two_rank_dump("before", tmp_path_factory), tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("first NaN/Inf of the job: step 0, rank 1, Torch.exp.0.forward "
            "(before Distributed.all_reduce.0.forward)") in done.stdout
    # rank 0 sees the Inf only at the all_reduce's output: a consequence, listed as received
    row0 = next(line for line in done.stdout.splitlines() if "Distributed.all_reduce.0.forward" in line
                and "during communication" in line)
    assert "received it" in row0
    report = report_of(tmp_path)
    assert list(report) == ["rank_1"]  # rank 0's Inf came later, through the collective
    node = report["rank_1"][0]
    assert node["op_name"] == "Torch.exp.0.forward"
    assert node["data_info"]["output"][0]["Max"] == float("inf")
    assert node["construct_info"] == ["Torch.exp.0.forward"]  # L1: no module parents
    assert any("torch.exp" in line for line in node["stack_info"])


@pytest.mark.slow
def test_overflow_inside_the_all_reduce(tmp_path_factory, tmp_path):
    dump = two_rank_dump("during", tmp_path_factory)
    done = overflow_check(dump, tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("first NaN/Inf of the job: step 0, rank 0, Distributed.all_reduce.0.forward "
            "(during communication)") in done.stdout
    assert "the communication itself made it" in done.stdout
    assert "rank(s) 1 show one at the same point" in done.stdout
    report = report_of(tmp_path)
    assert list(report) == ["rank_0", "rank_1"]  # both ranks' all_reduce, the named one first
    for rank in (0, 1):
        node = report[f"rank_{rank}"][0]
        assert node["op_name"] == "Distributed.all_reduce.0.forward"
        assert node["data_info"]["input_args"][0]["Max"] == pytest.approx(3e38, rel=1e-6)  # finite in
        assert node["data_info"]["output"][0]["Max"] == float("inf")  # Inf out
    # the input's Mean/Norm overflow in float32 although every value is finite: not taken for an Inf
    assert report["rank_0"][0]["data_info"]["input_args"][0]["Norm"] == float("inf")


@pytest.mark.slow
def test_clean_run_says_so_and_writes_nothing(tmp_path_factory, tmp_path):
    done = overflow_check(two_rank_dump("clean", tmp_path_factory), tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "no NaN/Inf found in 2 rank dump(s) of 1 step(s)" in done.stdout
    assert not (tmp_path / "out").exists()
