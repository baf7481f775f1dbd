"""Weights per micro-step, and packs in msprobe's layout read back without probe's own members."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from probe_config_check.msprobe_layout import to_members
from probe_config_check.pack import read_pack, write_pack
from probe_config_check.report import compare_data
from probe_config_check.steps import max_steps
from probe_core.errors import CheckError
from probe_core.plugins import current_registry

from tests.config_check.conftest import run_probe, run_python

SCRIPT = Path(__file__).parent / "scripts" / "toy_train.py"


def _summary(bench: Path, target: Path, out: Path) -> dict:
    done = run_probe("check", "compare", bench, target, "-o", out)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "summary.json").read_text())["checkers"]


@pytest.mark.slow
def test_lr_only_change_shows_in_the_weights_of_step_1(tmp_path):
    """Before: weights were recorded once, when ConfigChecker was created, so this change passed."""
    (tmp_path / "train.sh").write_text("python train.py --micro-batch-size 2\n")
    run_python(SCRIPT, tmp_path / "a.zip", tmp_path / "train.sh", cwd=tmp_path)
    run_python(SCRIPT, tmp_path / "b.zip", tmp_path / "train.sh", "--lr", "0.2", cwd=tmp_path)
    summary = _summary(tmp_path / "a.zip", tmp_path / "b.zip", tmp_path / "out")
    failed = {name for name, result in summary.items() if result["status"] == "fail"}
    assert failed == {"weights"}
    items = [d["item"] for d in summary["weights"]["differences"]]
    assert items[0].startswith("step 1 / ") and not any(i.startswith("step 0 /") for i in items)
    assert {i.split(" / ")[1] for i in items if i.startswith("step 1 /")} == {"0.weight", "0.bias", "2.weight",
                                                                            "2.bias"}


def _stats(value: float) -> dict:
    return {"shape": [2], "dtype": "float32", "max": value, "min": -value, "mean": 0.0, "norm": 2 * value}


DATA = {
    0: {"env": {"variables": {"NCCL_ALGO": "ring", "HF_TOKEN": "<redacted>"}},
        "pip": {"packages": {"torch": "2.1.0", "numpy": "1.26.4"}, "compared": ["numpy", "torch"]},
        "hyperparameters": {"parameters": {"learning_rate": {"value": 0.0001, "source": "train.sh: lr"},
                                           "seed": {"value": 42, "source": "train.sh: seed"}}},
        "weights": {"steps": {"0": {"fc.weight": _stats(1.0)}, "1": {"fc.weight": _stats(1.5)}}},
        "dataset": {"steps": {"0": {"args.0": _stats(3.0), "kwargs.mask": _stats(1.0)}}},
        "random": {"calls": {"random.random @ train.py:9(main) < train.py:20(<module>)": 2,
                             "numpy.random.rand @ data.py:3(load)": 1}, "patched": ["random"]}},
    1: {"weights": {"steps": {"0": {"fc.weight": _stats(1.0)}}},
        "random": {"calls": {"torch.manual_seed @ train.py:5(<module>)": 1}}},
}


def _msprobe_only(path: Path, data: dict) -> Path:
    """A zip holding only what msprobe writes (no manifest, no rankN/*.json)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in to_members(data).items():
            archive.writestr(name, text)
    return path


def test_msprobe_layout_round_trips_every_builtin_item(tmp_path):
    members = to_members(DATA)
    assert json.loads(members["weights/step1/rank0/weight.json"]) == {
        "fc.weight": {"max": 1.5, "min": -1.5, "mean": 0.0, "norm": 3.0}}
    assert json.loads(members["dataset/step0/rank0/dataset.json"])["kwargs"] == {
        "mask": {"max": 1.0, "min": -1.0, "mean": 0.0, "norm": 2.0}}
    assert members["pip"] == "torch=2.1.0\nnumpy=1.26.4\n"
    assert json.loads(members["random/rank0.json"])["np.random.rand"] == [
        {"count": 1, "stack": ["File data.py, line 3, in load, "]}]
    _, back = read_pack(_msprobe_only(tmp_path / "theirs.zip", DATA))
    results = compare_data(current_registry(), DATA, back)
    assert {r.name: r.status for r in results} == dict.fromkeys(
        ("env", "pip", "hyperparameters", "weights", "dataset", "random"), "pass")
    assert sum(len(r.rows) for r in results) == 14  # 2 env, 2 pip, 2 hyper, 3 weights, 2 dataset, 3 random


def test_version_1_pack_weights_compare_as_step_0(tmp_path):
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(old, "w") as archive:
        archive.writestr("manifest.json", json.dumps({"format": "probe-config-check", "version": 1, "ranks": [0]}))
        archive.writestr("rank0/weights.json", json.dumps({"parameters": {"fc.weight": _stats(1.0)}}))
    new = write_pack(tmp_path / "new.zip", {0: {"weights": {"steps": {"0": {"fc.weight": _stats(1.0)},
                                                                    "1": {"fc.weight": _stats(2.0)}}}}}, {})
    summary = _summary(old, new, tmp_path / "out")["weights"]
    assert summary["status"] == "pass" and summary["rows"] == 2  # step 0 equal, step 1 only in the new pack


def test_broken_msprobe_member_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("env", "{}")
        archive.writestr("weights/step0/rank0/weight.json", "[1, 2]")
    done = run_probe("check", "compare", bad, _msprobe_only(tmp_path / "good.zip", DATA), "-o", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "weights/step0/rank0/weight.json holds list, not a JSON object" in done.stderr


def test_msprobe_zip_appended_twice_is_refused_with_the_reason(tmp_path):
    twice = tmp_path / "twice.zip"
    with zipfile.ZipFile(twice, "w") as archive:
        archive.writestr("env", "{}")
    with zipfile.ZipFile(twice, "a") as archive, pytest.warns(UserWarning, match="Duplicate"):
        archive.writestr("env", "{}")  # msprobe appends to an existing zip
    with pytest.raises(CheckError, match="delete the old zip before collecting again"):
        read_pack(twice)


@pytest.mark.parametrize("options, expected", [({}, 5), ({"dataset_steps": 2}, 2), ({"steps": 3}, 3)])
def test_steps_option(options, expected):
    assert max_steps(options) == expected


@pytest.mark.parametrize("value", [0, -1, "3", 2.5])
def test_bad_steps_option_names_the_key(value):
    with pytest.raises(CheckError, match=r'"config_check.steps" is .*at least 1'):
        max_steps({"steps": value})
