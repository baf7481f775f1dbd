"""Words a person reads (issue 37, item 3): an md5 run is called md5, ``--task md5`` points at ``summary_mode``,
and the graph viewer's MaxAbsErr ... are sizes, never signed."""

from __future__ import annotations

import json
import re

from probe_core import testing
from probe_modes.statistics import StatisticsMode
from tests.report.helpers import TRAIN, probe


def test_md5_is_refused_as_a_task_with_msprobe_spelling_and_named_in_the_summary(tmp_path, capsys, monkeypatch):
    done = probe("run", "--task", "md5", "--dump-path", tmp_path / "refused", TRAIN, "--steps", "1", cwd=tmp_path,
                 check=False)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert ('key "task": "md5" is a summary_mode of task "statistics", not a task; msprobe spells it "task": '
            '"statistics", "statistics": {"summary_mode": "md5"}') in done.stderr
    assert not (tmp_path / "refused").exists()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "statistics": {"summary_mode": "md5"}}))
    monkeypatch.setenv("COLUMNS", "200")
    assert testing.command(["run", "-c", config, "--dump-path", tmp_path / "d", TRAIN, "--steps", "1"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"task / level +│ statistics \(summary_mode md5\) / mix ", printed), printed
    data = json.loads(next((tmp_path / "d").rglob("dump.json")).read_text())["data"]
    leaf = next(iter(data.values()))["input_args"][0]
    assert "md5" in leaf and "Max" in leaf  # what the summary names is what was dumped


def test_the_viewers_abs_err_columns_are_never_signed():
    mode = StatisticsMode()
    names = ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr"]
    shown = mode.shown_rows(names, [[-0.5, 0.25, -3e-9, -1.0, 0.1], [2.0, "N/A", 1.5, 0.0, 0.2]])
    assert [row["MaxAbsErr"] for row in shown] == ["0.5", "2.0"]  # a column of floats at once
    assert [row["MinAbsErr"] for row in shown] == ["0.25", "N/A"]  # a mixed column, value by value
    assert shown[0]["MeanAbsErr"] == "3e-09" and shown[0]["NormAbsErr"] == "1.0"
    assert shown[0]["MaxRelativeErr"] == "10%"
    assert mode.shown_metrics({"Max diff": -0.5, "Min diff": "N/A"}) == {"MaxAbsErr": "0.5", "MinAbsErr": "N/A"}
