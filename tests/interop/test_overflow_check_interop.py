"""``probe overflow-check`` and msprobe 26.2.0's offline ``overflow_check`` on the same two-rank dumps.

msprobe's tool runs on CPU on PyTorch dumps (it reads only dump.json, stack.json and construct.json) and
reads probe's dumps. Both tools name the same entry: rank 1's ``torch.exp`` when it overflows before the
all_reduce; the all_reduce itself when the sum overflows inside it (there msprobe names one of the two
tied ranks, probe names rank 0 and lists rank 1 as concurrent).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.interop.msprobe_env import msprobe_cli
from tests.overflow_check.dist_runs import two_rank_dump
from tests.overflow_check.test_distributed import overflow_check


def named(out: Path) -> dict[str, list[str]]:
    (report,) = out.glob("anomaly_analyze_*.json")
    return {rank: [node["op_name"] for node in nodes] for rank, nodes in json.loads(report.read_text()).items()}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["before", "during"])
def test_msprobe_and_probe_name_the_same_first_overflow(msprobe, tmp_path_factory, tmp_path, case):
    step = two_rank_dump(case, tmp_path_factory) / "step0"
    done = msprobe_cli(msprobe, "overflow_check", "-i", step, "-o", tmp_path / "msprobe")
    assert done.returncode == 0, done.stderr[-2000:]
    by_msprobe = named(tmp_path / "msprobe")
    done = overflow_check(step, tmp_path / "probe")
    assert done.returncode == 0, done.stderr
    by_probe = named(tmp_path / "probe")
    if case == "before":
        assert by_msprobe == by_probe == {"rank_1": ["Torch.exp.0.forward"]}
    else:
        assert by_probe == {f"rank_{r}": ["Distributed.all_reduce.0.forward"] for r in (0, 1)}
        ((rank, names),) = by_msprobe.items()
        assert names == ["Distributed.all_reduce.0.forward"] and rank in by_probe
    # the node layout is msprobe's: the same keys, the same recorded data
    ((rank, names),) = list(by_msprobe.items())[:1]
    ms_node = json.loads(next((tmp_path / "msprobe").glob("*.json")).read_text())[rank][0]
    probe_node = json.loads(next((tmp_path / "probe").glob("*.json")).read_text())[rank][0]
    assert probe_node == ms_node
