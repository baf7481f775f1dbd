"""``--executor``: a rank's chain of steps is a job; local processes and a real Dask cluster give the answer
one process gives, and the same files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compare.dumps import tiny_model_entries, write_dump
from tests.compare.helpers import read_summary, result_csv, run_probe

RANKS, STEPS = 4, 2


def _job(root: Path) -> tuple[Path, Path]:
    """4 ranks x 2 steps; rank 2's fc1 differs from step 1 on (the bug), every other (step, rank) agrees."""
    for side in ("t", "b"):
        for step in range(STEPS):
            for rank in range(RANKS):
                bug = side == "t" and rank == 2 and step == 1
                write_dump(root / side / f"step{step}" / f"rank{rank}", tiny_model_entries(1.01 if bug else 1.0))
    return root / "t", root / "b"


def _comparable(summary: dict) -> str:
    """summary.json without the paths, which name each run's own output folder."""
    summary = dict(summary, output=None, ranks=[dict(r, csv=Path(r["csv"]).name[:-19], xlsx=None)
                                                for r in summary["ranks"]])
    return json.dumps(summary, sort_keys=True)


def _compare(target: Path, bench: Path, out: Path, *flags: str) -> dict:
    done = run_probe("compare", target, bench, "-o", out, "--quiet", *flags)
    assert done.returncode == 0, done.stderr
    return read_summary(out)


def test_local_workers_and_a_dask_cluster_give_one_processes_summary(tmp_path):
    import distributed  # the [dask] extra: part of make test's install
    target, bench = _job(tmp_path)
    alone = _compare(target, bench, tmp_path / "one")
    assert alone["first_divergence"]["rank_id"] == 2 and alone["first_divergence"]["step"] == 1
    assert alone["first_divergence"]["name"] == "Module.fc1.Linear.forward.0"
    assert len(alone["ranks"]) == RANKS * STEPS
    local = _compare(target, bench, tmp_path / "local", "--workers", "2")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        on_cluster = _compare(target, bench, tmp_path / "dask", "--scheduler", cluster.scheduler_address)
        workers = len(cluster.scheduler_info["workers"])
    assert workers == 2
    assert _comparable(local) == _comparable(alone) == _comparable(on_cluster)
    for step in range(STEPS):
        for rank in range(RANKS):
            expected = result_csv(tmp_path / "one", rank, step).read_text()
            assert result_csv(tmp_path / "dask", rank, step).read_text() == expected
            assert result_csv(tmp_path / "local", rank, step).read_text() == expected


def test_a_local_dask_cluster_of_workers(tmp_path):
    target, bench = _job(tmp_path)
    summary = _compare(target, bench, tmp_path / "out", "--executor", "dask", "--workers", "2")
    assert summary["first_divergence"]["rank_id"] == 2 and summary["counts"]["error"] >= 1


def test_scheduler_with_the_local_executor_is_a_clear_error(tmp_path):
    target, bench = _job(tmp_path)
    done = run_probe("compare", target, bench, "-o", tmp_path / "out", "--executor", "local",
                     "--scheduler", "tcp://127.0.0.1:1")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--scheduler tcp://127.0.0.1:1 sends jobs to a Dask cluster" in done.stderr


def test_one_ranks_steps_in_local_processes(tmp_path):
    """A single rank: --workers shares its steps out, and the answer and files stay the same."""
    target, bench = _job(tmp_path)
    alone = _compare(target, bench, tmp_path / "one", "--rank", "2")
    two = _compare(target, bench, tmp_path / "two", "--rank", "2", "--workers", "2")
    assert alone["first_divergence"]["step"] == 1 and len(alone["ranks"]) == STEPS
    assert _comparable(two) == _comparable(alone)
    for step in range(STEPS):
        assert result_csv(tmp_path / "two", 2, step).read_text() == result_csv(tmp_path / "one", 2, step).read_text()
