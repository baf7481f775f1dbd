"""FSDP2 and tensor parallelism (DTensor) under ``probe run`` on two gloo CPU ranks: training as without probe,
entries inside the model on every rank, shards recorded with msprobe's DTensor keys, and ``probe compare`` of a
run with a planted change (the second GELU's tanh approximation) naming it."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collect.helpers import PROBE, ROOT, load
from tests.ports import free_port

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "sharded_train.py"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _torchrun(*args: str, cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([TORCHRUN, "--nproc_per_node=2", f"--master_port={free_port()}", *args], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def _losses(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"(rank\d step\d) loss (\d+\.\d{10})", stdout))


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["fsdp", "tp"])
def test_sharded_run_same_losses_and_compare_finds_plant(tmp_path, layout):
    plain = _losses(_torchrun(str(SCRIPT), layout, cwd=tmp_path))
    bench = _losses(_torchrun(PROBE, "run", "--dump-path", "bench", str(SCRIPT), layout, cwd=tmp_path))
    assert len(plain) == 6 and bench == plain  # bit for bit the losses of the run without probe
    _torchrun(PROBE, "run", "--dump-path", "target", str(SCRIPT), layout, "--plant", cwd=tmp_path)

    for rank in (0, 1):
        data = load(tmp_path / "bench" / "step0" / f"rank{rank}" / "dump.json")["data"]
        first = next(iter(data))
        assert not first.startswith(("Torch.sym_", "Torch.chunk", "Tensor.chunk")), first  # sharding is no entry
        assert "Functional.linear.1.forward" in data and "Functional.gelu.1.forward" in data
        grads = data["Module.2.Linear.parameters_grad.0" if layout == "tp" else "Module.2.FSDPLinear.parameters_grad.0"]
        weight = grads["weight"][0]
        assert weight["type"] == "torch.distributed.tensor.DTensor"
        assert weight["device_mesh"] == [0, 1]
        if layout == "fsdp":  # each rank holds half the rows of the 16x16 gradient
            assert weight["placements"] == [{"Shard": {"dim": 0}}] and weight["shape"] == [8, 16]
            assert "Distributed.all_gather_single.0.forward" in data  # FSDP2's forward all-gather
        else:  # RowwiseParallel: half the columns; the partial sums are reduced by DTensor's all_reduce
            assert weight["placements"] == [{"Shard": {"dim": 1}}] and weight["shape"] == [16, 8]
            reduce = data["Torch.all_reduce.0.forward"]
            assert reduce["output"][0]["Norm"] != reduce["input_args"][0]["Norm"]  # recorded after the reduction
    shards = [load(tmp_path / "bench" / "step0" / f"rank{r}" / "dump.json")["data"]["Functional.linear.0.forward"]
              for r in (0, 1)]
    assert shards[0]["input_args"][1]["Norm"] != shards[1]["input_args"][1]["Norm"] or layout == "fsdp"

    done = subprocess.run([PROBE, "compare", "target", "bench", "-o", "cmp"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    if layout == "tp":
        first = json.loads((tmp_path / "cmp" / "summary.json").read_text())["first_divergence"]
        assert first["name"].startswith("Functional.gelu.1.forward") and first["rank"] == "rank0_step0", first
        return
    # FSDP2 all-gathers into buffers it has just allocated (torch.empty): their recorded values are whatever
    # the memory held, so compare flags them too (msprobe leaves such buffers out: builtin_ignore_ops.yaml;
    # probe does not yet). Past them, the first error is the planted GELU.
    rows = list(csv.DictReader(next((tmp_path / "cmp" / "step0").glob("compare_result_rank0_*.csv")).open()))
    errors = [r["NPU Name"] for r in rows if r["Result"] == "error" and not r["NPU Name"].startswith(_FSDP_BUFFERS)]
    assert errors and errors[0].startswith("Functional.gelu.1.forward"), errors


_FSDP_BUFFERS = ("Torch.all_gather_copy_in.", "Distributed.all_gather_single.", "Torch.split_with_sizes_copy.")
