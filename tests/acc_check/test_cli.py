"""`probe acc-check` as a user runs it: a planted operator bug, a killed and resumed run, user errors."""

from __future__ import annotations

import json

import numpy as np

from .conftest import probe, read_csv

PLANTED_GELU = """
import torch
import torch.nn.functional as F
_gelu = F.gelu
def gelu(input, approximate="none"):  # a subtly wrong kernel: the tanh approximation, except in float64
    return _gelu(input, approximate="tanh" if input.dtype != torch.float64 else approximate)
F.gelu = gelu
"""

#: Dies in the middle of the 11th API: its details rows written, its result row not.
KILL_AT_11 = """
import os
from probe_acc_check import results
_write, _calls = results.ResultFiles.write, [0]
def write(self, result):
    _calls[0] += 1
    if _calls[0] == 11:
        with open(self.details, "a") as handle:
            handle.write(results.csv_text([results._detail(row) for row in result.rows]))
        os._exit(9)
    _write(self, result)
results.ResultFiles.write = write
"""


def _one(folder, pattern):
    (found,) = folder.glob(pattern)
    return found


def test_a_planted_operator_bug_is_flagged_and_only_it(stat_dump, tmp_path):
    done = probe("acc-check", "-api_info", str(stat_dump / "dump.json"), "-o", "out", "-save_error_data",
                 cwd=tmp_path, prelude=PLANTED_GELU)
    assert done.returncode == 0, done.stderr
    rows = {row["API Name"]: row for row in read_csv(_one(tmp_path / "out", "accuracy_checking_result_*.csv"))}
    flagged = {name for name, row in rows.items() if "error" in (row["Forward Test Success"],
                                                                 row["Backward Test Success"])}
    assert flagged == {"Functional.gelu.0"}
    assert rows["Functional.gelu.0"]["Forward Test Success"] == "error"
    assert all(row["Forward Test Success"] in ("pass", "SKIP") for name, row in rows.items() if name not in flagged)
    assert "Functional.gelu.0" in done.stdout and "1 error" in done.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [f["api"] for f in summary["failing"]] == ["Functional.gelu.0"]
    # -save_error_data: the inputs and both runs' outputs of the failing API
    saved = tmp_path / "out" / "error_data"
    tested = np.load(saved / "Functional.gelu.0.forward.output.0.tested.npy")
    bench = np.load(saved / "Functional.gelu.0.forward.output.0.bench.npy")
    x = np.load(saved / "Functional.gelu.0.forward.input.0.npy")
    assert tested.shape == bench.shape == x.shape and 1e-4 < np.abs(tested - bench).max() < 1e-2
    assert sorted(p.name for p in saved.iterdir() if "gelu" not in p.name) == []


def test_a_killed_run_resumed_with_result_csv_path_ends_with_the_same_files(stat_dump, tmp_path):
    full = probe("acc-check", "-api_info", str(stat_dump), "-o", "full", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    killed = probe("acc-check", "-api_info", str(stat_dump), "-o", "part", cwd=tmp_path, prelude=KILL_AT_11)
    assert killed.returncode == 9
    result = _one(tmp_path / "part", "accuracy_checking_result_*.csv")
    assert len(read_csv(result)) == 10
    resumed = probe("acc-check", "-api_info", str(stat_dump), "--result_csv_path", str(result), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    for pattern in ("accuracy_checking_result_*.csv", "accuracy_checking_details_*.csv"):
        assert _one(tmp_path / "part", pattern).read_text() == _one(tmp_path / "full", pattern).read_text(), pattern
    summary = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert summary["resumed"] and (summary["apis"], summary["pass"]) == (27, 27)


def test_user_errors_are_one_red_line(tmp_path):
    missing = probe("acc-check", "-api_info", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        "error: nowhere: no such file or folder; give a dump.json, a rank folder, a step folder or a dump root"]
    (tmp_path / "dump.json").write_text('{"task": "statistics", "level": "L1", "framework": "pytorch", "data": {"To')
    torn = probe("acc-check", "-api_info", "dump.json", cwd=tmp_path)
    assert torn.returncode == 2 and len(torn.stderr.strip().splitlines()) == 1 and "truncated" in torn.stderr
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                    "data": {"Torch.randn.0.forward": {"input_args": []}}}))
    (tmp_path / "blocker").write_text("a file, not a folder")
    unwritable = probe("acc-check", "-api_info", "dump.json", "-o", "blocker/out", cwd=tmp_path)
    lines = unwritable.stderr.strip().splitlines()
    assert unwritable.returncode == 2 and len(lines) == 1, unwritable.stderr
    assert lines[0].startswith("error: -o blocker/out: ") and "blocker is a file" in lines[0]
    neither = probe("acc-check", cwd=tmp_path)
    assert neither.returncode == 2 and "-api_info DUMP is required" in neither.stderr
