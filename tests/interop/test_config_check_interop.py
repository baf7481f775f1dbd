"""config_check packs cross over: probe reads msprobe's zips, msprobe reads probe's.

Each side's packs plant one difference per check item; the other tool must report exactly those.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from openpyxl import load_workbook

from tests.config_check.conftest import fake_distribution, run_probe, run_python
from tests.interop.msprobe_env import msprobe_cli, run_msprobe_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_config_check"
TOY_TRAIN = Path(__file__).resolve().parents[1] / "config_check" / "scripts" / "toy_train.py"


def _probe_compare(bench: Path, target: Path, out: Path) -> dict:
    done = run_probe("check", "compare", bench, target, "-o", out)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "summary.json").read_text())["checkers"]


def _items(summary: dict, checker: str) -> list[str]:
    return [d["item"] for d in summary[checker]["differences"]]


def _check_msprobe_pack_differences(summary: dict) -> None:
    """What make_packs.py planted, as probe reports it."""
    assert {name: v["status"] for name, v in summary.items()} == dict.fromkeys(
        ("env", "pip", "hyperparameters", "weights", "dataset", "random"), "fail")
    env = summary["env"]["differences"]
    assert [(d["item"], d["bench"], d["target"]) for d in env] == [("NCCL_ALGO", "ring", "tree")]
    assert summary["env"]["rows"] == 3  # OMP_NUM_THREADS, NCCL_ALGO, HF_TOKEN (redacted); PATH etc. not compared
    pip = summary["pip"]["differences"]
    assert [(d["item"], d["bench"], d["target"]) for d in pip] == [("transformers", "4.40.0", "4.41.0")]
    hyper = summary["hyperparameters"]["differences"]
    assert [(d["item"], d["bench"], d["target"]) for d in hyper] == [("learning_rate", 1e-4, 2e-4)]
    # lr 0.1 -> 0.2 with the same initial weights: nothing at step 0, every parameter from step 1 on
    params = ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert _items(summary, "weights") == [f"step {s} / {p}" for s in (1, 2) for p in params]
    assert summary["weights"]["rows"] == 12
    assert _items(summary, "dataset") == ["step 2 / args.0"]
    [extra] = summary["random"]["differences"]
    assert extra["item"].startswith("random.random @ make_packs.py:") and (extra["bench"], extra["target"]) == (1, 2)


def test_probe_compares_two_msprobe_packs(tmp_path):
    """The stored packs of msprobe (make_packs.py): before, refused for a missing manifest."""
    summary = _probe_compare(FIXTURES / "bench.zip", FIXTURES / "target.zip", tmp_path / "out")
    _check_msprobe_pack_differences(summary)
    rows = json.dumps(summary)
    assert "fixture-secret-not-real" not in rows  # msprobe packs every variable; probe redacts when reading
    assert (tmp_path / "out" / "bench" / "weights" / "step2" / "rank0" / "weight.json").is_file()


@pytest.mark.slow
def test_probe_reads_fresh_msprobe_packs(msprobe, tmp_path):
    """The fixture's generator still runs under msprobe 26.2.0 and probe reads what it writes today."""
    shutil.copy(FIXTURES / "make_packs.py", tmp_path)
    done = run_msprobe_python(msprobe, tmp_path / "make_packs.py", tmp_path / "packs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    _check_msprobe_pack_differences(_probe_compare(tmp_path / "packs" / "bench.zip",
                                                   tmp_path / "packs" / "target.zip", tmp_path / "out"))


def _probe_packs(root: Path) -> tuple[Path, Path]:
    """Two probe packs of toy_train.py planting one difference per item msprobe checks."""
    sides = {"bench": ("ring", "4.40.0", "1e-4", []),
             "target": ("tree", "4.41.0", "2e-4", ["--lr", "0.2", "--batch-delta", "1.0", "--extra-rng", "1"])}
    for side, (algo, version, script_lr, extra) in sides.items():
        (root / side).mkdir()
        (root / side / "train.sh").write_text(f"torchrun --nproc_per_node 1 pretrain.py --lr {script_lr} "
                                              "--micro-batch-size 2\n")
        site = fake_distribution(root / side / "site", "transformers", version)
        run_python(TOY_TRAIN, root / f"{side}.zip", root / side / "train.sh", *extra, cwd=root / side,
                   pythonpath=[site], env={"NCCL_ALGO": algo, "OMP_NUM_THREADS": "1"})
    return root / "bench.zip", root / "target.zip"


def _sheet(book, name: str) -> list[dict]:
    rows = list(book[name].iter_rows(values_only=True))
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


@pytest.mark.slow
def test_msprobe_compares_two_probe_packs(msprobe, tmp_path):
    """msprobe config_check -c on probe's packs finds every planted difference (before: an empty summary)."""
    bench, target = _probe_packs(tmp_path)
    done = msprobe_cli(msprobe, "config_check", "-c", bench, target, "-o", tmp_path / "result", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    book = load_workbook(tmp_path / "result" / "result.xlsx")
    status = {row["filename"]: row["pass_check"] for row in _sheet(book, "summary")}
    assert status == dict.fromkeys(("env", "pip", "dataset", "weights", "hyperparameters", "random"), "error")
    # msprobe 26.2 passes bench and cmp the other way round into its env compare: the sides come out swapped
    assert [(r["bench_env_name"], {r["bench_value"], r["cmp_value"]}) for r in _sheet(book, "env")] == [
        ("NCCL_ALGO", {"ring", "tree"})]
    assert [(r["package"], r["bench version"], r["cmp version"]) for r in _sheet(book, "pip")] == [
        ("transformers", "4.40.0", "4.41.0")]
    assert [(r["bench_para"], r["level"]) for r in _sheet(book, "hyperparameters")] == [("learning_rate", "error")]
    weights = _sheet(book, "weights")
    assert {(r["step"], r["equal"]) for r in weights} == {(0, True), (1, False), (2, False)}
    dataset = {r["step"]: r["equal"] for r in _sheet(book, "dataset")}
    assert dataset == {0: True, 1: False, 2: True}  # toy_train.py changes the batch of step 1
    random_rows = {r["op"]: (r["bench_count"], r["cmp_count"], r["check_result"]) for r in _sheet(book, "random")}
    assert random_rows["random.random"] == (1, 2, False)
    assert all(ok for op, (_, _, ok) in random_rows.items() if op != "random.random")
