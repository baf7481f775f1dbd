"""The done-when scenario: two environments differing in exactly one thing per checker."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from openpyxl import load_workbook

from tests.config_check.conftest import fake_distribution, run_probe, run_python

pytestmark = pytest.mark.slow  # two real training runs in subprocesses

SCRIPT = Path(__file__).parent / "scripts" / "toy_train.py"
SECRET = "s3cr3t-value-never-packed"


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dynamic")
    (root / "train.sh").write_text("#!/bin/bash\nLR=1e-4\ntorchrun pretrain.py --lr $LR \\\n"
                                   "  --micro-batch-size 2 --seq-length=128 --data-path /data/a\n")
    (root / "config.yaml").write_text("optimizer:\n  learning_rate: 0.0001\nmicro_batch_size: 2\n"
                                      "seq_length: 128\ndata_path: /other/place\n")
    bench_site = fake_distribution(root / "site_bench", "transformers", "4.40.0")
    target_site = fake_distribution(root / "site_target", "transformers", "4.41.0")
    common = {"HCCL_TOKEN_SECRET": SECRET, "NCCL_AUTH_KEY": SECRET, "OMP_NUM_THREADS": "1"}
    run_python(SCRIPT, root / "bench.zip", root / "train.sh", cwd=root, pythonpath=[bench_site],
               env={**common, "NCCL_ALGO": "ring"})
    run_python(SCRIPT, root / "target.zip", root / "config.yaml", "--weight-delta", "0.25",
               "--batch-delta", "1.0", "--extra-rng", "1", cwd=root, pythonpath=[target_site],
               env={**common, "NCCL_ALGO": "tree"})
    return {"root": root, "bench": root / "bench.zip", "target": root / "target.zip"}


@pytest.fixture(scope="module")
def compared(packs) -> dict:
    out = packs["root"] / "result"
    done = run_probe("check", "compare", packs["bench"], packs["target"], "-o", out)
    assert done.returncode == 0, done.stderr
    assert "config check" in done.stdout and "fail" in done.stdout
    return {"out": out, "summary": json.loads((out / "summary.json").read_text())["checkers"]}


def _items(summary: dict, checker: str) -> list[str]:
    return [d["item"] for d in summary[checker]["differences"]]


def test_pack_layout(packs):
    with zipfile.ZipFile(packs["bench"]) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("manifest.json"))
    for checker in ("env", "pip", "hyperparameters", "weights", "dataset", "random"):
        assert f"rank0/{checker}.json" in names
    assert manifest["format"] == "probe-config-check" and manifest["ranks"] == [0] and manifest["version"] == 2
    # the same data in msprobe's layout, one weights/dataset file per forward call (3 ran)
    assert {"env", "pip", "hyperparameters/hyperparameters_static.json", "random/rank0.json"} <= names
    for step in range(3):
        assert {f"weights/step{step}/rank0/weight.json", f"dataset/step{step}/rank0/dataset.json"} <= names
    assert manifest["checkers"]["weights"]["distribution"] == "probe-config-check"


def test_secret_values_never_reach_the_zip(packs):
    for pack in (packs["bench"], packs["target"]):
        raw = pack.read_bytes()
        assert SECRET.encode() not in raw
        with zipfile.ZipFile(pack) as archive:
            for name in archive.namelist():
                assert SECRET.encode() not in archive.read(name), name
            env = json.loads(archive.read("rank0/env.json"))["variables"]
        assert env["HCCL_TOKEN_SECRET"] == "<redacted>" and env["NCCL_AUTH_KEY"] == "<redacted>"
        assert env["OMP_NUM_THREADS"] == "1"


def test_env_flags_only_the_changed_variable(compared):
    assert compared["summary"]["env"]["status"] == "fail"
    assert _items(compared["summary"], "env") == ["NCCL_ALGO"]
    diff = compared["summary"]["env"]["differences"][0]
    assert (diff["bench"], diff["target"]) == ("ring", "tree")


def test_pip_flags_only_the_changed_version(compared):
    assert _items(compared["summary"], "pip") == ["transformers"]
    diff = compared["summary"]["pip"]["differences"][0]
    assert (diff["bench"], diff["target"]) == ("4.40.0", "4.41.0")


def test_hyperparameters_spelled_differently_but_equal_pass(compared):
    assert compared["summary"]["hyperparameters"] == {"status": "pass", "rows": 3, "differences": []}


def test_weights_flag_only_the_changed_parameter(compared):
    """Weights are recorded per forward call (3 ran); the changed element feeds a hidden unit the ReLU
    keeps at zero, so training carries the difference in that one parameter only."""
    assert _items(compared["summary"], "weights") == [f"step {s} / 2.weight" for s in range(3)]


def test_dataset_flags_only_the_changed_batch(compared):
    assert _items(compared["summary"], "dataset") == ["step 1 / args.0"]


def test_random_flags_the_extra_call(compared):
    diffs = compared["summary"]["random"]["differences"]
    assert len(diffs) == 1
    assert diffs[0]["item"].startswith("random.random @ toy_train.py:")
    assert (diffs[0]["bench"], diffs[0]["target"]) == (1, 2)
    # torch RNG calls (nn.Linear init through Tensor.uniform_, torch.rand) were seen on both sides
    assert compared["summary"]["random"]["rows"] > 3


def test_result_workbook_has_summary_and_one_sheet_per_checker(compared):
    book = load_workbook(compared["out"] / "result.xlsx")
    assert book.sheetnames == ["summary", "env", "pip", "hyperparameters", "weights", "dataset", "random"]
    rows = {row[0]: row[1] for row in book["summary"].iter_rows(min_row=2, values_only=True)}
    assert rows == {"env": "fail", "hyperparameters": "pass", "pip": "fail", "weights": "fail",
                    "dataset": "fail", "random": "fail"}
    header = [c.value for c in book["weights"][1]]
    assert header == ["rank", "item", "bench", "target", "pass", "note"]
    assert (compared["out"] / "bench" / "rank0" / "weights.json").is_file()
    assert (compared["out"] / "target" / "manifest.json").is_file()


def test_same_pack_passes_everything(packs, tmp_path):
    done = run_probe("check", "compare", packs["bench"], packs["bench"], "-o", tmp_path / "same")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "same" / "summary.json").read_text())["checkers"]
    assert {name: v["status"] for name, v in summary.items()} == dict.fromkeys(
        ("env", "hyperparameters", "pip", "weights", "dataset", "random"), "pass")
