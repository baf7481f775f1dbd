"""Helpers for the monitor tests: the real CLI and scripts in subprocesses, monitor CSVs read back."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
TRAIN = SCRIPTS / "train.py"
FIXTURE = HERE / "fixtures" / "msprobe_monitor_csv"
PROBE = str(Path(sys.executable).parent / "probe")


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "MONITOR_", "DYNAMIC_"))}
    clean.update(COLUMNS="200", OMP_NUM_THREADS="1", **extra)
    return clean


def run(*command: str, cwd: Path, check: bool = True, **extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env(**extra), capture_output=True, text=True,
                          timeout=300)
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def probe(*args: str, cwd: Path, check: bool = True, **extra: str) -> subprocess.CompletedProcess:
    return run(PROBE, *args, cwd=cwd, check=check, **extra)


def train(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return run(sys.executable, TRAIN, *args, cwd=cwd, **extra)


def monitor_run(out: str, *args: str, cwd: Path, config: Path | None = None) -> subprocess.CompletedProcess:
    """``probe run --task monitor [-c config] --dump-path out train.py args``."""
    options = ["-c", str(config)] if config else []
    return probe("run", "--task", "monitor", *options, "--dump-path", out, str(TRAIN), *args, cwd=cwd)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or ()), list(reader)


def rank_dir(out: Path, rank: int = 0) -> Path:
    """The one folder of ``rank`` in a monitor output: msprobe's ``{time}-rank{R}-{id}``."""
    from probe_monitor.layout import MSPROBE_DIR

    found = [p for p in out.iterdir() if (m := MSPROBE_DIR.match(p.name)) and int(m["rank"]) == rank]
    assert len(found) == 1, sorted(p.name for p in out.iterdir())
    return found[0]


def write_config(path: Path, **keys) -> Path:
    path.write_text(json.dumps(keys))
    return path


@contextlib.contextmanager
def inside(folder: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def probe_here(*args: str, cwd: Path) -> int:
    """The ``probe`` CLI in this process (torch is imported once for all the runs of a test module)."""
    from probe_core.cli import main

    with inside(cwd):
        return main([str(a) for a in args])


def monitor_here(out: str, *args: str, cwd: Path, config: Path | None = None) -> None:
    """``probe run --task monitor`` in this process; see :func:`monitor_run`."""
    options = ["-c", str(config)] if config else []
    assert probe_here("run", "--task", "monitor", *options, "--dump-path", out, str(TRAIN), *args, cwd=cwd) == 0


def train_here(*args: str, cwd: Path, script: Path = TRAIN) -> None:
    """A training script as ``python SCRIPT ARGS`` would run it, in this process."""
    saved = sys.argv[:]
    sys.argv = [str(script), *map(str, args)]
    try:
        with inside(cwd):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved
