"""Graphs of real dumps made by probe's collector: a perturbed-layer pair in statistics, md5, tensor and
structure modes (tests/graph/tiny_run.py: the same seeded model, one run's fc2 computes 3x its output)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.graph.helpers import only_db, rows, run_probe

TINY = Path(__file__).with_name("tiny_run.py")
RUNS = {
    "stat": ["statistics"], "stat_perturbed": ["statistics", "statistics", "--perturb"],
    "md5": ["statistics", "md5"], "md5_perturbed": ["statistics", "md5", "--perturb"],
    "tensor": ["tensor"], "tensor_perturbed": ["tensor", "--perturb"],
    "structure": ["structure"], "structure_perturbed": ["structure", "--perturb"],
}
PERTURBED = "Module.fc2.ScaledLinear.forward.0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    for name, args in RUNS.items():
        subprocess.run([sys.executable, str(TINY), str(root / name), *args], check=True, timeout=120,
                       capture_output=True)
    return root


def _target_rows(dumps: Path, tmp_path: Path, mode: str) -> tuple[dict, str]:
    done = run_probe("-tp", dumps / f"{mode}_perturbed", "-gp", dumps / mode, "-o", tmp_path / mode)
    return {name: row for (source, name), row in rows(only_db(tmp_path / mode)).items() if source == "NPU"}, done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stat", "md5", "tensor"])
def test_perturbed_layer_is_flagged_and_nodes_before_it_pass(dumps: Path, tmp_path: Path, mode: str) -> None:
    npu, stdout = _target_rows(dumps, tmp_path, mode)
    assert npu[PERTURBED]["precision_index"] == 1
    first = min((row["node_order"], name) for name, row in npu.items() if (row["precision_index"] or 0) > 0)
    assert first[1] in ("Tensor.__mul__.0.forward", "Functional.linear.1.forward")  # inside the perturbed layer
    before = [row for row in npu.values() if row["node_order"] < npu["Functional.linear.1.forward"]["node_order"]]
    assert before and all(row["precision_index"] == 0 for row in before)
    assert first[1] in stdout


@pytest.mark.slow
def test_structure_dumps_compare_structure_only(dumps: Path, tmp_path: Path) -> None:
    npu, _ = _target_rows(dumps, tmp_path, "structure")
    assert npu and all(row["precision_index"] == 0 for row in npu.values())
    assert all(row["matched_node_link"] != "[]" for row in npu.values())
