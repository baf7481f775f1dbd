"""Fixtures of the external-plugin tests: packages pip-installed into folders, dumps made once per session.

Each package is copied out of the repository before ``pip install --target`` so that its build
files land in the temporary folder; the folder is then put on ``PYTHONPATH`` of the real ``probe``
CLI (:func:`tests.config_check.conftest.run_probe`). Dumps are made once per session, the two runs
of a pair side by side.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config_check.conftest import PROBE, REPO, clean_env

PACKAGES = Path(__file__).resolve().with_name("packages")
XOR = REPO / "examples" / "plugins" / "probe-xor"
TRAIN_TINY = REPO / "examples" / "train_tiny.py"
TRAIN_SMALL = REPO / "tests" / "collect" / "scripts" / "train_small.py"
TOY_MEGATRON = REPO / "tests" / "graph" / "toy_megatron.py"

#: The well-behaved plugins, installed together (the broken comparator gets a folder of its own).
GOOD = [XOR] + [PACKAGES / name for name in ("probe-test-comparator", "probe-test-merger", "probe-test-command",
                                              "probe-test-config-section")]


def pip_install(target: Path, sources: list[Path], scratch: Path) -> Path:
    """``pip install --no-deps --no-build-isolation --target target`` of copies of ``sources``."""
    copies = []
    for source in sources:
        copy = scratch / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        copies.append(copy)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--target", str(target), *map(str, copies)],
                   check=True, capture_output=True, text=True, timeout=300)
    return target


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """probe-xor and the test packages (comparator, merger, command, config section), installed by pip."""
    return pip_install(tmp_path_factory.mktemp("plugin_site"), GOOD, tmp_path_factory.mktemp("plugin_src"))


@pytest.fixture(scope="session")
def broken_site(tmp_path_factory) -> Path:
    """probe-test-broken-comparator alone, installed by pip."""
    return pip_install(tmp_path_factory.mktemp("broken_site"), [PACKAGES / "probe-test-broken-comparator"],
                       tmp_path_factory.mktemp("broken_src"))


def run_together(*commands: tuple[list[str], Path], site: Path | None = None, timeout: int = 300) -> None:
    """Run ``(argv, cwd)`` commands side by side; fail with the output of any that fails."""
    env = clean_env(pythonpath=[site] if site else [])
    procs = [(argv, subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)) for argv, cwd in commands]
    failures = []
    for argv, proc in procs:
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            failures.append(f"{' '.join(argv)} exited {proc.returncode}:\n{out[-2000:]}\n{err[-4000:]}")
    assert not failures, "\n".join(failures)


def write_config(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="session")
def xor_dumps(tmp_path_factory, plugin_site) -> Path:
    """``A``: examples/train_tiny.py dumped in xor mode (step 0); ``B``: the same with ``--gelu-tanh``."""
    root = tmp_path_factory.mktemp("xor_dumps")
    config = write_config(root / "xor.json", {"task": "statistics", "step": [0], "statistics": {"summary_mode": "xor"}})
    run_together(([PROBE, "run", "-c", str(config), "--dump-path", "A", str(TRAIN_TINY)], root),
                 ([PROBE, "run", "-c", str(config), "--dump-path", "B", str(TRAIN_TINY), "--gelu-tanh"], root),
                 site=plugin_site)
    return root


@pytest.fixture(scope="session")
def stat_dumps(tmp_path_factory) -> Path:
    """``A``/``B`` as in :func:`xor_dumps`, in the default statistics mode (no plugin needed to make them)."""
    root = tmp_path_factory.mktemp("stat_dumps")
    config = write_config(root / "stat.json", {"task": "statistics", "step": [0]})
    run_together(([PROBE, "run", "-c", str(config), "--dump-path", "A", str(TRAIN_TINY)], root),
                 ([PROBE, "run", "-c", str(config), "--dump-path", "B", str(TRAIN_TINY), "--gelu-tanh"], root))
    return root


@pytest.fixture(scope="session")
def toy_tp2pp2(tmp_path_factory) -> Path:
    """tests/graph/toy_megatron.py on 4 ranks, tp=2 x pp=2 (one step, statistics)."""
    root = tmp_path_factory.mktemp("toy") / "tp2pp2"
    run_together(([sys.executable, str(TOY_MEGATRON), str(root), "4", "2", "2"], REPO))
    return root


# -- reading results ---------------------------------------------------------------------------------------


def only_db(folder: Path) -> Path:
    found = sorted(folder.glob("*.vis.db"))
    assert len(found) == 1, found
    return found[0]


def read_db(db: Path) -> tuple[dict, dict[tuple[str, str], dict]]:
    """(tb_config row, ``{(data_source, node_name): tb_nodes row}``) of a ``.vis.db``, opened read-only."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        config = dict(conn.execute("SELECT * FROM tb_config").fetchone())
        nodes = {(r["data_source"], r["node_name"]): dict(r) for r in conn.execute("SELECT * FROM tb_nodes")}
    finally:
        conn.close()
    return config, nodes


def csv_rows(out: Path) -> list[dict[str, str]]:
    import csv

    found = sorted(out.glob("compare_result_*.csv"))
    assert len(found) == 1, found
    with found[0].open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def xlsx_rows(out: Path) -> list[dict[str, object]]:
    """The first sheet of the one ``compare_result_*.xlsx`` as dicts keyed by its header row."""
    import openpyxl

    found = sorted(out.glob("compare_result_*.xlsx"))
    assert len(found) == 1, found
    book = openpyxl.load_workbook(found[0], read_only=True)
    try:
        sheet = book.worksheets[0]
        rows = sheet.iter_rows(values_only=True)
        header = [str(cell) for cell in next(rows)]
        return [dict(zip(header, row, strict=False)) for row in rows]
    finally:
        book.close()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]
