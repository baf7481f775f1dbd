"""Two ranks under torchrun (gloo, CPU): one rank folder each, all_reduce recorded as a Distributed entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collect.helpers import PROBE, ROOT, load

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "dist_train.py"


@pytest.mark.slow
def test_torchrun_two_ranks(tmp_path):
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([str(torchrun), "--nproc_per_node=2", "--master_port=29517", PROBE, "run",
                             "--level", "L1", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for step in (0, 1):
        for rank in (0, 1):
            data = load(tmp_path / "probe_dump" / f"step{step}" / f"rank{rank}" / "dump.json")["data"]
            entry = data["Distributed.all_reduce.0.forward"]
            assert entry["input_args"][0]["shape"] == []
            assert "Functional.linear.0.forward" in data
    reduced = [load(tmp_path / "probe_dump" / "step0" / f"rank{r}" / "dump.json")["data"]
               ["Distributed.all_reduce.0.forward"]["output"][0]["Max"] for r in (0, 1)]
    assert reduced[0] == pytest.approx(reduced[1])
