"""Two ranks under torchrun (gloo, CPU): one rank folder each, all_reduce recorded as a Distributed entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collect.helpers import PROBE, ROOT, load
from tests.ports import free_port

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "dist_train.py"
ASYNC_SCRIPT = ROOT / "tests" / "collect" / "scripts" / "dist_async.py"


@pytest.mark.slow
def test_torchrun_two_ranks(tmp_path):
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([str(torchrun), "--nproc_per_node=2", f"--master_port={free_port()}", PROBE, "run",
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


@pytest.mark.slow
def test_async_collectives_recorded_at_wait(tmp_path):
    """``async_op=True``, ``isend``/``irecv``: the entry's output is the tensor after ``wait()`` (the sum of
    both ranks, the received values), written as msprobe writes a collective's output: its arguments."""
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([str(torchrun), "--nproc_per_node=2", f"--master_port={free_port()}", str(ASYNC_SCRIPT),
                             str(tmp_path / "dump")], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        data = load(tmp_path / "dump" / "step0" / f"rank{rank}" / "dump.json")["data"]
        reduce = data["Distributed.all_reduce.0.forward"]
        assert reduce["input_args"][0]["Max"] == rank + 1  # before the communication
        assert reduce["output"][0]["Max"] == reduce["output"][0]["Min"] == 3.0  # 1 + 2, after wait()
        assert reduce["output"][1] == {"type": "bool", "value": True}  # then async_op, as msprobe writes it
        name = "Distributed.isend.0.forward" if rank == 0 else "Distributed.irecv.0.forward"
        assert data[name]["output"][0]["Max"] == 10.0  # rank 1 shows what it received
