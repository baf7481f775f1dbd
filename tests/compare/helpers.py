"""Helpers for compare tests: run the real CLI, read results."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

PROBE = str(Path(sys.executable).parent / "probe")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run_probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, timeout=300)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def read_summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())
