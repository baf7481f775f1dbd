"""Real runs the report tests share: two dumps of the tiny model (block 0's GELU tanh in the target) compared by
probe compare, probe locate from those dumps and probe acc-check of the target's linear calls in bfloat16 (each
with --html), and two monitored runs (learning rate doubled from step 2, the loss 1000x at step 3: a
gradient spike its monitor logs) compared by probe monitor compare."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from probe_core import testing
from tests.report.helpers import TRAIN


@pytest.fixture(scope="session")
def dumps(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report_dumps")
    testing.collect(TRAIN, root / "bench", args=["--steps", "3"])
    testing.collect(TRAIN, root / "target", args=["--steps", "3", "--tanh-block", "0"])
    testing.compare(root / "target", root / "bench", root / "cmp")
    return root


@pytest.fixture(scope="session")
def monitored(tmp_path_factory) -> Path:
    from tests.monitor.helpers import monitor_here

    root = tmp_path_factory.mktemp("report_monitor")
    monitor_here("base", "--steps", "4", cwd=root)
    spikes = {"wg_distribution": True, "param_distribution": True, "mv_distribution": True,  # probe run's defaults
              "alert": {"rules": [{"rule_name": "AnomalyZScore", "args": {"min_history": 2}}]}}
    (root / "spikes.json").write_text(json.dumps(spikes))
    monitor_here("lr", "--steps", "4", "--lr-change-step", "2", "--spike-step", "3", cwd=root,
                 config=root / "spikes.json")
    assert testing.command(["monitor", "compare", root / "lr", root / "base", "-o", root / "cmp", "--no-xlsx"]) == 0
    return root


@pytest.fixture(scope="session")
def located(dumps, tmp_path_factory) -> Path:
    """``probe locate`` from the two dumps (stages 2 and 3 on them), its page in ``locate.html``."""
    root = tmp_path_factory.mktemp("report_locate")
    assert testing.command(["locate", "--bench-dump", dumps / "bench", "--target-dump", dumps / "target",
                            "-o", root / "loc", "--html", root / "locate.html"]) == 0
    return root


@pytest.fixture(scope="session")
def acc_checked(dumps, tmp_path_factory) -> tuple[Path, str]:
    """``probe acc-check`` of the target's linear calls in bfloat16 (some miss the float64 standard), its page in
    ``acc.html``; and what it printed to a 60-column pipe."""
    root = tmp_path_factory.mktemp("report_acc")
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setenv("COLUMNS", "60")
        assert testing.command(["acc-check", "-api_info", dumps / "target" / "step0", "-o", root / "acc",
                                "--dtype", "bfloat16", "--filter", "Functional.linear*", "--html",
                                root / "acc.html"]) == 0
    return root, printed.getvalue()
