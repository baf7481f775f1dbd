"""A comparator from outside: tests/plugins/packages/probe-test-comparator (plugin ``absmean``), pip-installed.

Its column, its verdict (``judge``) and its tool tip reach the CSV, the XLSX and the ``.vis.db``;
disabling it with ``-c config.json`` removes them; a comparator that raises costs only its column.
"""

from __future__ import annotations

import json

import pytest

from tests.config_check.conftest import run_probe
from tests.plugins.conftest import csv_rows, only_db, read_db, write_config, xlsx_rows

COLUMN = "AbsMeanDiff"
#: After the gelu: its inputs differ already, so statistics mode passes it; absmean's verdict warns.
LINEAR = "Functional.linear.3.forward"


@pytest.fixture(scope="module")
def compared(stat_dumps, plugin_site, tmp_path_factory):
    out = tmp_path_factory.mktemp("absmean") / "out"
    done = run_probe("compare", stat_dumps / "B", stat_dumps / "A", "-o", out, "--xlsx", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def disabled_config(tmp_path_factory):
    return write_config(tmp_path_factory.mktemp("cfg") / "cfg.json", {"plugins": {"disable": ["absmean"]}})


def test_column_and_verdict_in_csv(compared):
    rows = {row["NPU Name"]: row for row in csv_rows(compared)}
    header = list(next(iter(rows.values())))
    assert header[-1] == COLUMN  # placement "extra" (the default): after msprobe's columns
    row = rows[f"{LINEAR}.output.0"]
    assert float(row[COLUMN]) > 1e-6
    assert row["Result"] == "warning" and "mean moved by" in row["Err_message"]
    unmoved = rows["Functional.layer_norm.0.forward.output.0"]
    assert float(unmoved[COLUMN]) == 0.0 and unmoved["Result"] == "pass"
    summary = json.loads((compared / "summary.json").read_text())
    assert summary["first_divergence"]["name"] == "Functional.gelu.0.forward"


def test_column_and_verdict_in_xlsx(compared):
    rows = {row["NPU Name"]: row for row in xlsx_rows(compared)}
    row = rows[f"{LINEAR}.output.0"]
    assert COLUMN in row and float(row[COLUMN]) > 1e-6
    assert row["Result"] == "warning" and "mean moved by" in str(row["Err_message"])


def test_column_verdict_and_tip_in_graph(stat_dumps, plugin_site, disabled_config, tmp_path):
    done = run_probe("graph", stat_dumps / "B", stat_dumps / "A", "-o", tmp_path / "g", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    config, nodes = read_db(only_db(tmp_path / "g"))
    assert "absolute difference of the target and bench means" in json.loads(config["tool_tip"])[COLUMN]
    node = nodes[("NPU", LINEAR)]
    outputs = json.loads(node["output_data"])
    assert float(outputs[f"{LINEAR}.output.0"][COLUMN]) > 1e-6
    assert node["precision_index"] == 0.5  # the comparator's warning
    # without the comparator the same node passes: the index above is its verdict
    done = run_probe("graph", stat_dumps / "B", stat_dumps / "A", "-o", tmp_path / "g2", "-c", disabled_config,
                     pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    config, nodes = read_db(only_db(tmp_path / "g2"))
    assert COLUMN not in json.loads(config["tool_tip"])
    node = nodes[("NPU", LINEAR)]
    assert node["precision_index"] == 0 and COLUMN not in node["output_data"]


def test_disabling_the_comparator_removes_its_column(stat_dumps, plugin_site, disabled_config, tmp_path):
    done = run_probe("compare", stat_dumps / "B", stat_dumps / "A", "-o", tmp_path / "out", "--xlsx", "-c",
                     disabled_config, pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    rows = {row["NPU Name"]: row for row in csv_rows(tmp_path / "out")}
    row = rows[f"{LINEAR}.output.0"]
    assert COLUMN not in row and row["Result"] == "pass"
    assert COLUMN not in xlsx_rows(tmp_path / "out")[0]


def test_a_comparator_that_raises_costs_only_its_column(stat_dumps, broken_site, tmp_path):
    done = run_probe("compare", stat_dumps / "B", stat_dumps / "A", "-o", tmp_path / "out", pythonpath=[broken_site])
    assert done.returncode == 0, done.stderr
    assert "comparator 'broken_column'" in done.stderr and "RuntimeError" in done.stderr
    assert done.stderr.count("raised in compare") == 1  # warned once, then left out
    rows = csv_rows(tmp_path / "out")
    assert rows and all(row["BrokenColumn"] == "N/A" for row in rows)
    assert any(row["Max diff"] not in ("", "N/A") for row in rows)  # the built-in columns are intact
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["first_divergence"]["name"] == "Functional.gelu.0.forward"
