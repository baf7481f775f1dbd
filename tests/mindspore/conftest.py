"""Shared helpers for the MindSpore tests: dump a network in-process with probe_mindspore's PrecisionDebugger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms
import pytest

from . import ms_net

ms.set_device("CPU")
ms.runtime.launch_blocking()

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "msprobe_mindspore_stat_mix" / "step0"


def dump_ms(out: Path, run: Any, model: Any = None, **overrides: Any) -> Path:
    """Collect ``run()`` into ``out`` (one step) and return the step-0 rank folder."""
    from probe_mindspore import PrecisionDebugger

    overrides.setdefault("task", "statistics")
    overrides.setdefault("level", "mix")
    debugger = PrecisionDebugger(dump_path=str(out), **overrides)
    debugger.start(model)
    try:
        run()
    finally:
        debugger.stop()
        debugger.close()
    return out / "step0" / "rank0"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def fixture_net_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's network (same seed and data), one training step, statistics, mix."""
    ms.set_seed(0)
    net = ms_net.Net()
    return dump_ms(tmp_path_factory.mktemp("ms_mix"), lambda: ms_net.train(net, 1), model=net)
