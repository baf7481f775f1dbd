"""Dumps of every task that records statistics, collected for real (PyTorch, CPU, one rank)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.overflow_check.test_cli import probe


def collect(dump_path, task: str, **options) -> None:
    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    debugger = PrecisionDebugger(dump_path=str(dump_path), task=task, level="L1", **options)
    debugger.start(model)
    hidden = model(torch.randn(2, 4))
    scores = torch.exp(hidden * 1000.0)  # overflows float32
    scores.sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()


@pytest.mark.parametrize("task", ["statistics", "tensor", "overflow_check"])
def test_first_overflow_in_each_task(tmp_path, task):
    collect(tmp_path / "dump", task)
    done = probe("overflow-check", "-i", tmp_path / "dump", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "first NaN/Inf of the job: step 0, rank 0, Torch.exp.0.forward (no communication)" in done.stdout
    (report,) = (tmp_path / "out").glob("anomaly_analyze_*.json")
    (node,) = json.loads(report.read_text())["rank_0"]
    assert node["op_name"] == "Torch.exp.0.forward" and node["data_info"]["output"][0]["Max"] == float("inf")
