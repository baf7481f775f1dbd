"""Real runs the report tests share: two dumps of the tiny model (block 0's GELU tanh in the target) compared by
probe compare, and two monitored runs (learning rate doubled from step 2) compared by probe monitor compare."""

from __future__ import annotations

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
    monitor_here("lr", "--steps", "4", "--lr-change-step", "2", cwd=root)
    assert testing.command(["monitor", "compare", root / "lr", root / "base", "-o", root / "cmp", "--no-xlsx"]) == 0
    return root
