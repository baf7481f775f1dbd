"""Helpers for compare tests: run the real CLI, read results."""

from __future__ import annotations

import csv
import json
import re
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


def result_file(out: Path, rank: int = 0, step: int = 0, suffix: str = ".csv") -> Path:
    """The result file ``probe compare`` wrote for (rank, step), as summary.json names it
    (``compare_result_rank{R}_{timestamp}.csv``, msprobe's name)."""
    for entry in read_summary(out)["ranks"]:
        if entry["label"] == f"rank{rank}_step{step}":
            path = Path(entry["csv"] if suffix == ".csv" else entry["xlsx"])
            # a dump without a rank folder is msprobe's single-rank "compare_result_rank_{timestamp}"
            assert re.fullmatch(rf"compare_result_rank({rank}|)_\d{{14}}", path.stem) and path.suffix == suffix, path
            return path
    raise AssertionError(f"no result for rank {rank} step {step} in {out}/summary.json")


def result_csv(out: Path, rank: int = 0, step: int = 0) -> Path:
    return result_file(out, rank, step, ".csv")
