"""Shared helpers of the collection tests: run a model under a PrecisionDebugger, read a dump."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROBE = str(VENV_BIN / "probe")
FIXTURE = ROOT / "tests" / "fixtures" / "msprobe_pytorch_stat_mix" / "step0" / "proc11440"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def one_step(dump_path: Path, model_factory=None, seed: int = 0, **options: Any) -> Path:
    """Train the fixture model one step under a debugger; returns ``step0/rank0``."""
    from probe_torch import PrecisionDebugger

    from tests.collect.fixture_model import Model

    torch.manual_seed(seed)
    model = (model_factory or Model)()
    x, y = torch.randn(4, 8, 64), torch.randint(0, 10, (4,))
    debugger = PrecisionDebugger(dump_path=str(dump_path), **options)
    debugger.start(model)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return dump_path / "step0" / "rank0"


def run_probe(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([PROBE, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
