"""Helpers for the graph tests: copies of msprobe's real dump that tests edit, the probe CLI, reading .vis.db."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TORCH_DUMP = FIXTURES / "msprobe_pytorch_stat_mix" / "step0" / "proc11440"
MS_DUMP = FIXTURES / "msprobe_mindspore_stat_mix" / "step0"
MSPROBE_DB = FIXTURES / "msprobe_vis_db" / "build_single_stat_mix.vis.db"
PROBE = str(Path(sys.executable).parent / "probe")


def run_probe(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([PROBE, "graph", *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    if check and done.returncode != 0:
        raise AssertionError(f"probe graph failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def only_db(folder: Path) -> Path:
    found = sorted(folder.glob("*.vis.db"))
    assert len(found) == 1, found
    return found[0]


def rows(db: Path, where: str = "1=1", params: tuple = ()) -> dict[tuple[str, str], dict]:
    """``{(data_source, node_name): row}`` of tb_nodes."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {(r["data_source"], r["node_name"]): dict(r)
                for r in conn.execute(f"SELECT * FROM tb_nodes WHERE {where}", params)}
    finally:
        conn.close()


class EditableDump:
    """A copy of a real rank folder whose dump.json/construct.json tests may edit."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self, name: str):
        return json.loads((self.folder / name).read_text())

    def save(self, name: str, data) -> None:
        (self.folder / name).write_text(json.dumps(data))

    def rename(self, old: str, new: str) -> None:
        """Rename every occurrence of ``old`` in entry/node names (dump, construct and stack)."""
        for file in ("dump.json", "construct.json", "stack.json"):
            text = (self.folder / file).read_text()
            (self.folder / file).write_text(text.replace(old, new))

    def scale_output(self, entry: str, factor: float, index: int = 0) -> None:
        dump = self.load("dump.json")
        tensor = dump["data"][entry]["output"][index]
        for key in ("Max", "Min", "Mean", "Norm"):
            tensor[key] *= factor
        self.save("dump.json", dump)


def copy_dump(source: Path, target: Path) -> EditableDump:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o750 if path.is_dir() else 0o640)
    return EditableDump(target)


@pytest.fixture
def torch_pair(tmp_path: Path) -> tuple[EditableDump, EditableDump]:
    """(target, bench): two copies of msprobe's PyTorch mix dump, in rank folders."""
    return (copy_dump(TORCH_DUMP, tmp_path / "target" / "step0" / "rank0"),
            copy_dump(TORCH_DUMP, tmp_path / "bench" / "step0" / "rank0"))
