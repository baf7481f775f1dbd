"""The real CLI on a real training script: ``probe run --task monitor`` (unmodified script, ``step(closure)``),
training untouched bit for bit, anomalies, and ``probe monitor compare`` naming where two runs part."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from openpyxl import load_workbook
from PIL import Image

from tests.monitor.helpers import (SCRIPTS, monitor_here, monitor_run, probe, probe_here, rank_dir, read_csv, train_here,
                                   write_config)

STEPS = "6"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Monitor outputs of the same script: twice plain (once by the real CLI, once in-process), once with
    step(closure), once with the learning rate doubled from step 3, once with a bug scaling the gradient
    entering fc2 (so fc2's and fc1's gradients)."""
    root = tmp_path_factory.mktemp("runs")
    monitor_run("base", "--steps", STEPS, cwd=root)
    monitor_here("again", "--steps", STEPS, cwd=root)
    monitor_here("closure", "--steps", STEPS, "--closure", cwd=root)
    monitor_here("lr", "--steps", STEPS, "--lr-change-step", "3", cwd=root)
    monitor_here("scaled", "--steps", STEPS, "--closure", "--scale-grad-of", "fc2", cwd=root)
    return root


def _compare(root: Path, a: str, b: str, out: str) -> tuple[dict, str]:
    done = probe("monitor", "compare", a, b, "-o", out, cwd=root)
    return json.loads((root / out / "summary.json").read_text()), done.stdout


def test_unmodified_script_is_monitored_step_by_step(runs):
    folder = rank_dir(runs / "base")
    tags = {p.name.rsplit("_", 1)[0] for p in folder.glob("*.csv")}
    assert tags == {"grad_unreduced", "grad_reduced", "grad_norm", "param_origin", "param_updated", "exp_avg",
                    "exp_avg_sq"}
    for step in range(int(STEPS)):
        _, rows = read_csv(folder / f"grad_reduced_{step}-{step}.csv")
        assert [r["name"] for r in rows] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                             "fc3.bias"]
        assert {r["step"] for r in rows} == {str(step)}


def test_step_closure_records_what_a_plain_step_records(runs):
    for path in sorted(rank_dir(runs / "base").glob("*.csv")):
        assert (rank_dir(runs / "closure") / path.name).read_text() == path.read_text(), path.name


def test_training_is_bitwise_identical_with_and_without_the_monitor(tmp_path):
    config = write_config(tmp_path / "all.json", wg_distribution=True, param_distribution=True, mv_distribution=True,
                          xy_distribution=True, cc_distribution=True, ops=["min", "max", "mean", "norm", "zeros", "nans"])
    train_here("--steps", "4", "--save", "plain.pt", cwd=tmp_path)
    train_here("--steps", "4", "--save", "api.pt", "--monitor", config, "--out", "api_out", cwd=tmp_path)
    assert probe_here("run", "--task", "monitor", "-c", config, "--dump-path", "run_out", SCRIPTS / "train.py",
                      "--steps", "4", "--closure", "--save", "run.pt", cwd=tmp_path) == 0
    train_here("--steps", "4", "--closure", "--save", "closure.pt", cwd=tmp_path)
    assert (rank_dir(tmp_path / "api_out") / "actv_grad_3-3.csv").is_file()
    assert (rank_dir(tmp_path / "run_out") / "actv_3-3.csv").is_file()
    for plain, monitored in (("plain.pt", "api.pt"), ("closure.pt", "run.pt")):
        a, b = torch.load(tmp_path / plain), torch.load(tmp_path / monitored)
        assert all(torch.equal(x, y) for x, y in zip(a["losses"], b["losses"], strict=True))
        assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"])


def test_compare_names_the_step_where_the_learning_rate_changed(runs):
    summary, stdout = _compare(runs, "lr", "base", "cmp_lr")
    first = summary["first_divergence"]
    assert (first["step"], first["quantity"], first["rank"]) == (3, "param_updated", 0)
    assert first["name"] == "fc1.weight" and first["module"] == "fc1"
    at_step = {q["quantity"]: q for q in summary["quantities_at_first_step"]}
    assert at_step["param_updated"]["parting"] == 6
    assert all(q["parting"] == 0 for name, q in at_step.items() if name != "param_updated")
    assert "part at step 3" in stdout and "param_updated" in stdout
    out = runs / "cmp_lr"
    header, rows = read_csv(out / "monitor_compare.csv")
    assert header[:7] == ["rank", "step", "micro_step", "quantity", "vpp_stage", "name", "module"]
    assert not any(r["parts"] == "True" for r in rows if int(r["step"]) < 3)
    sheet = load_workbook(out / "monitor_compare.xlsx").active
    assert sheet.max_row == len(rows) + 1
    with Image.open(out / "first_divergence.png") as image:
        assert image.format == "PNG" and image.size[0] > 300


def test_summary_only_writes_the_same_verdict_and_no_tables(runs):
    full, _ = _compare(runs, "lr", "base", "cmp_lr_full")
    probe("monitor", "compare", "lr", "base", "-o", "cmp_lr_summary", "--summary-only", cwd=runs)
    out = runs / "cmp_lr_summary"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["first_divergence"] == full["first_divergence"] and summary["first_divergence"] is not None
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert (summary["csv"], summary["xlsx"], summary["plot"]) == (None, None, None)
    refused = probe("monitor", "compare", "lr", "base", "-o", "cmp_lr_html", "--summary-only", "--html",
                    "r.html", cwd=runs, check=False)
    assert refused.returncode == 2 and "--summary-only" in refused.stderr


def test_compare_names_the_layer_whose_gradient_a_bug_scales(runs):
    summary, _ = _compare(runs, "scaled", "base", "cmp_scaled")
    first = summary["first_divergence"]
    assert (first["step"], first["quantity"], first["module"]) == (0, "grad_unreduced", "fc2")
    assert first["rel_diff"] == pytest.approx(0.01, rel=0.05)
    header, rows = read_csv(runs / "cmp_scaled" / "monitor_compare.csv")
    fc3 = [r for r in rows if r["step"] == "0" and r["quantity"] == "grad_unreduced" and r["module"] == "fc3"]
    assert fc3 and all(r["parts"] == "False" for r in fc3)  # above the bug: untouched


def test_compare_with_a_rank_neither_run_has_names_the_ranks_present(runs):
    done = probe("monitor", "compare", "again", "base", "-o", "cmp_none", "--rank", "7", cwd=runs, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "again has ranks 0, base has 0; --rank 7 leaves no rank in common" in done.stderr


def test_compare_of_identical_runs_names_nothing(runs):
    summary, stdout = _compare(runs, "again", "base", "cmp_same")
    assert summary["first_divergence"] is None and summary["plot"] is None
    assert summary["rows"] > 0 and summary["only_in_a"] == summary["only_in_b"] == 0
    assert "agree at every step" in stdout
    assert not (runs / "cmp_same" / "first_divergence.png").exists()


def test_nan_in_one_layer_at_step_5_is_reported_at_step_5(tmp_path, capfd):
    monitor_here("out", "--steps", "8", "--nan-grad-step", "5", cwd=tmp_path)
    stderr = capfd.readouterr().err
    lines = [line for line in stderr.splitlines() if line.startswith("probe monitor: step")]
    assert lines[0] == ("probe monitor: step 5 rank 0: grad_reduced of fc2.weight: NaN/Inf "
                        "(min=nan, max=nan, mean=nan, norm=nan)")
    anomalies = json.loads((rank_dir(tmp_path / "out") / "anomalies.json").read_text())
    assert anomalies[0] | {"detail": ""} == {"step": 5, "rank": 0, "metric": "grad_reduced", "name": "fc2.weight",
                                            "module": "fc2", "kind": "nan/inf", "stat": "min", "value": "nan",
                                            "detail": ""}
    assert min(a["step"] for a in anomalies) == 5
    assert "the first: step 5 rank 0, grad_reduced of fc2.weight" in stderr


def test_gradient_spike_is_reported_at_its_step_only(tmp_path):
    monitor_here("out", "--steps", "10", "--spike-step", "7", cwd=tmp_path)
    anomalies = json.loads((rank_dir(tmp_path / "out") / "anomalies.json").read_text())
    assert {a["step"] for a in anomalies} == {7}
    assert {a["kind"] for a in anomalies} == {"AnomalyZScore"}
    assert {a["metric"] for a in anomalies} == {"grad_unreduced", "grad_reduced", "grad_norm"}
    assert all(math.isfinite(a["value"]) for a in anomalies)
