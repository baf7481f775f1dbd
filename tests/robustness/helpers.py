"""Build real inputs (dumps, packs, safetensors files, configs) and run the real CLI on them."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from tests.compare.dumps import tiny_model_entries, write_dump

ROOT = Path(__file__).resolve().parents[2]
PROBE = str(Path(sys.executable).parent / "probe")


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")}
    outer = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    clean.update(COLUMNS="300", PYTHONPATH=os.pathsep.join(outer + [str(ROOT)]), OMP_NUM_THREADS="1")
    return clean


def run_probe(*args: object, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env(),
                          timeout=timeout)


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def assert_clean_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, no traceback, one error line holding every needle; returns that line."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def dump_pair(tmp_path: Path, mode: str = "statistics") -> tuple[Path, Path]:
    """A target and a bench rank folder of the same tiny model (identical data)."""
    target = write_dump(tmp_path / "target" / "step0" / "rank0", tiny_model_entries(), mode)
    bench = write_dump(tmp_path / "bench" / "step0" / "rank0", tiny_model_entries(), mode)
    return target, bench


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def safetensors_bytes(header: object, data: bytes = b"", raw_header: bytes | None = None) -> bytes:
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def good_safetensors(path: Path) -> Path:
    array = np.arange(6, dtype=np.float32)
    header = {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, array.nbytes]}}
    path.write_bytes(safetensors_bytes(header, array.tobytes()))
    return path


def zip_members(path: Path, members: list[tuple[str, bytes]]) -> Path:
    import warnings

    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # a duplicate name is the point of some tests
        for name, data in members:
            archive.writestr(name, data)
    return path


MANIFEST = json.dumps({"format": "probe-config-check", "version": 1, "ranks": [0], "checkers": {}}).encode()
