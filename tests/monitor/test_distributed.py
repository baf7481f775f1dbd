"""Two ranks under torchrun (gloo, DDP): one folder per rank (msprobe's ``{time}-rank{R}-{id}``); the reduced
gradients are equal across ranks and differ from each rank's unreduced (local) ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.monitor.helpers import PROBE, ROOT, SCRIPTS, rank_dir, read_csv, run
from tests.ports import free_port


@pytest.mark.slow
def test_two_ranks_reduced_equal_unreduced_local(tmp_path):
    torchrun = Path(sys.executable).parent / "torchrun"
    run(torchrun, "--nproc_per_node=2", f"--master_port={free_port()}", PROBE, "run", "--task", "monitor", "--dump-path", "out",
        SCRIPTS / "ddp_train.py", cwd=tmp_path, PYTHONPATH=str(ROOT))
    # a distributed job keeps its run marker (probe_core.collect.runlock)
    assert sorted(p.name.split("-rank")[-1][:1] for p in (tmp_path / "out").iterdir()) == [".", "0", "1"]
    for step in range(3):
        reduced, unreduced = [], []
        for rank in (0, 1):
            folder = rank_dir(tmp_path / "out", rank)
            reduced.append({r["name"]: float(r["norm"]) for r in read_csv(folder / f"grad_reduced_{step}-{step}.csv")[1]})
            unreduced.append({r["name"]: float(r["norm"])
                              for r in read_csv(folder / f"grad_unreduced_{step}-{step}.csv")[1]})
        assert set(reduced[0]) == {"module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"}
        assert reduced[0] == reduced[1]
        for name in reduced[0]:
            assert unreduced[0][name] != unreduced[1][name]
            assert reduced[0][name] not in (unreduced[0][name], unreduced[1][name])
