"""Batch builds: every rank of every step into one file, in worker processes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.graph.helpers import TORCH_DUMP, copy_dump, only_db, run_probe


def _root(where: Path, steps=(0, 1), ranks=(0, 1)) -> Path:
    for step in steps:
        for rank in ranks:
            copy_dump(TORCH_DUMP, where / f"step{step}" / f"rank{rank}")
    return where


def _counts(db: Path) -> dict[tuple, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return {(s, r, src): n for s, r, src, n in conn.execute(
            "SELECT step, rank, data_source, COUNT(*) FROM tb_nodes GROUP BY step, rank, data_source")}
    finally:
        conn.close()


@pytest.mark.slow
def test_root_of_steps_and_ranks_in_parallel(tmp_path: Path) -> None:
    target = _root(tmp_path / "target")
    bench = _root(tmp_path / "bench")
    run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "out", "--workers", "2")
    db = only_db(tmp_path / "out")
    assert _counts(db) == {(s, r, src): 164 for s in (0, 1) for r in (0, 1) for src in ("NPU", "Bench")}
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    ranks, steps = conn.execute("SELECT rank_list, step_list FROM tb_config").fetchone()
    ids = conn.execute("SELECT COUNT(DISTINCT graph_id) FROM tb_nodes").fetchone()[0]
    conn.close()
    assert json.loads(ranks) == [0, 1] and json.loads(steps) == [0, 1] and ids == 8


def test_step_folder_of_ranks(tmp_path: Path) -> None:
    target = _root(tmp_path / "target", steps=(3,), ranks=(0, 2))
    run_probe("-tp", target / "step3", "-o", tmp_path / "out")
    assert _counts(only_db(tmp_path / "out")) == {(3, 0, "NPU"): 164, (3, 2, "NPU"): 164}


def test_workers_and_a_dask_cluster_give_the_same_file_content(tmp_path: Path) -> None:
    target = _root(tmp_path / "target", steps=(0,), ranks=(0, 1, 2))
    bench = _root(tmp_path / "bench", steps=(0,), ranks=(0, 1, 2))
    run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "one")
    run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "two", "--workers", "2")
    run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "dask", "--executor", "dask", "--workers", "2")

    def content(db: Path) -> list:
        conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        try:
            return conn.execute("SELECT * FROM tb_nodes ORDER BY id").fetchall()
        finally:
            conn.close()

    one = content(only_db(tmp_path / "one"))
    assert len(one) == 3 * 2 * 164
    assert one == content(only_db(tmp_path / "two")) == content(only_db(tmp_path / "dask"))


def test_sides_without_common_ranks_are_a_clear_error(tmp_path: Path) -> None:
    target = _root(tmp_path / "target", steps=(0,), ranks=(0, 1))
    bench = _root(tmp_path / "bench", steps=(0,), ranks=(4, 5))
    done = run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "out", check=False)
    assert done.returncode == 2 and "share no step/rank" in done.stderr


def test_rank_and_step_pick_the_graphs_built(tmp_path: Path) -> None:
    """--rank and --step (repeatable, or comma lists, as probe compare's) keep only those graphs, on both sides;
    a rank the dump lacks is a clear error that lists the ranks present as runs; --rank with --rank-size
    (which merges every rank of a step) is refused."""
    target = _root(tmp_path / "target", steps=(0, 1), ranks=(0, 1, 2, 3))
    bench = _root(tmp_path / "bench", steps=(0, 1), ranks=(0, 1, 2, 3))
    run_probe("-tp", target, "-gp", bench, "-o", tmp_path / "out", "--rank", "1,3", "--step", "1")
    assert _counts(only_db(tmp_path / "out")) == {(1, r, src): 164 for r in (1, 3) for src in ("NPU", "Bench")}
    missing = run_probe(target, "-o", tmp_path / "none", "--rank", "7", "--rank", "9", check=False)
    assert missing.returncode == 2 and "no rank 7, 9 in this dump; ranks present: 0-3" in missing.stderr
    assert "Traceback" not in missing.stderr
    merged = run_probe(target, "-o", tmp_path / "merged", "--rank", "1", "--rank-size", "4", check=False)
    assert merged.returncode == 2 and "give one or the other" in merged.stderr
