"""Dumps of the small transformer (L1; statistics and tensor modes) and helpers to run the pre-check."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_core.testing import collect, registry_with

from . import model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def registry():
    """probe-core, the PyTorch and MindSpore collectors (their operator tables are what the pre-check may
    call), the data modes and probe-acc-check (its commands and standards)."""
    return registry_with(enable=["torch", "mindspore", "statistics", "tensor", "acc_check"])


def _dump(folder: Path, registry, task: str) -> Path:
    net, step = model.make_step()
    collect(step, folder, registry=registry, model=net, task=task, level="L1", risk_level="ALL")  # every API
    return folder / "step0" / "rank0"


@pytest.fixture(scope="session")
def stat_dump(tmp_path_factory, registry) -> Path:
    return _dump(tmp_path_factory.mktemp("stat"), registry, "statistics")


@pytest.fixture(scope="session")
def tensor_dump(tmp_path_factory, registry) -> Path:
    return _dump(tmp_path_factory.mktemp("tensor"), registry, "tensor")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def results(summary: dict) -> dict[str, dict[str, str]]:
    """The result CSV of a run, by API name."""
    return {row["API Name"]: row for row in read_csv(Path(summary["result_csv"]))}


def details(summary: dict) -> dict[str, dict[str, str]]:
    """The details CSV of a run, by output name."""
    return {row["API Name"]: row for row in read_csv(Path(summary["details_csv"]))}


def probe(*args: str, cwd: Path, prelude: str = "", timeout: int = 240) -> subprocess.CompletedProcess:
    """Run the real `probe` CLI in a subprocess; ``prelude`` is Python run first in that process (a patch)."""
    code = f"{prelude}\nimport sys\nfrom probe_core.cli import main\nsys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
