"""Two-rank gloo runs collected by ``probe run`` (statistics, L1), made once per test session and case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCRIPT = Path(__file__).resolve().parent / "scripts" / "overflow_dist.py"
_MADE: dict[str, Path] = {}


def two_rank_dump(case: str, tmp_path_factory) -> Path:
    """The dump root (``step0/rank{0,1}/``) of ``scripts/overflow_dist.py CASE`` under torchrun."""
    if case not in _MADE:
        work = tmp_path_factory.mktemp(f"overflow_{case}")
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        done = subprocess.run([str(BIN / "torchrun"), "--nproc_per_node=2", f"--master_port={free_port()}",
                               str(BIN / "probe"), "run", "--level", "L1", str(SCRIPT), case],
                              cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        _MADE[case] = work / "probe_dump"
    return _MADE[case]
