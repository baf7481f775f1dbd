"""The checkers' collect and compare sides, in process (no framework needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest
from probe_config_check import env, hyperparameters, packages
from probe_core.specs import CheckContext

from tests.config_check.conftest import run_probe


def test_shell_script_arguments_variables_arrays_and_continuations(tmp_path):
    script = tmp_path / "pretrain.sh"
    script.write_text(
        "#!/bin/bash\n"
        "export LR=3e-4   # peak\n"
        "GPT_ARGS=(\n  --num-layers 2\n  --hidden-size=64\n)\n"
        'DATA="--data-path /data/x --split 98,2,0"\n'
        "torchrun --nproc_per_node 8 pretrain_gpt.py ${GPT_ARGS[@]} $DATA \\\n"
        "    --learning-rate $LR --micro-batch-size 1 \\\n"
        "    --bf16 --seed 42 # comment --not-an-arg 1\n")
    params = hyperparameters.collect(CheckContext(shell_paths=[str(script)]))["parameters"]
    values = {k: v["value"] for k, v in params.items()}
    assert values == {"learning_rate": 3e-4, "num_layers": 2, "hidden_size": 64, "split": "98,2,0",
                      "nproc_per_node": 8, "micro_batch_size": 1, "bf16": True, "seed": 42}
    assert params["learning_rate"]["source"] == "pretrain.sh: learning-rate"


@pytest.mark.parametrize("bench, target", [("--lr 1e-4", "learning_rate: 0.0001"),
                                           ("--learning-rate=0.0001", '{"optimizer": {"lr": 1e-4}}'),
                                           ("--mbs 4", "per_device_train_batch_size: 4")])
def test_equivalent_spellings_compare_equal(tmp_path, bench, target):
    (tmp_path / "a.sh").write_text(f"python train.py {bench}\n")
    suffix = ".json" if target.startswith("{") else ".yaml"
    (tmp_path / f"b{suffix}").write_text(target + "\n")
    a = hyperparameters.collect(CheckContext(shell_paths=[str(tmp_path / "a.sh")]))
    b = hyperparameters.collect(CheckContext(shell_paths=[str(tmp_path / f"b{suffix}")]))
    rows = hyperparameters.compare(a, b)
    assert len(rows) == 1 and rows[0].passed, rows


def test_different_values_and_missing_keys_fail(tmp_path):
    (tmp_path / "a.sh").write_text("python t.py --lr 1e-4 --seed 1\n")
    (tmp_path / "b.sh").write_text("python t.py --lr 2e-4\n")
    rows = {r.item: r for r in hyperparameters.compare(
        hyperparameters.collect(CheckContext(shell_paths=[str(tmp_path / "a.sh")])),
        hyperparameters.collect(CheckContext(shell_paths=[str(tmp_path / "b.sh")])))}
    assert not rows["learning_rate"].passed and not rows["seed"].passed
    assert "missing in target" in rows["seed"].note


def test_secret_arguments_are_redacted(tmp_path):
    (tmp_path / "a.sh").write_text("python t.py --hf-token hf_live_123 --wandb-api-key abc --lr 1\n")
    data = hyperparameters.collect(CheckContext(shell_paths=[str(tmp_path / "a.sh")]))
    assert "hf_live_123" not in json.dumps(data) and "abc" not in json.dumps(data)
    assert data["parameters"]["hf_token"]["value"] == "<redacted>"


def test_no_scripts_means_no_hyperparameters():
    assert hyperparameters.collect(CheckContext()) is None


def test_env_redacts_secrets_and_ignores_unrelated(monkeypatch):
    monkeypatch.setenv("HCCL_DETERMINISTIC", "true")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdef")
    monkeypatch.setenv("NCCL_PASSWORD", "pw")
    monkeypatch.setenv("UNRELATED_VAR", "x")
    monkeypatch.setenv("MYCORP_TUNING", "7")
    variables = env.collect(CheckContext(options={"env_prefixes": ["MYCORP_"]}))["variables"]
    assert variables["HCCL_DETERMINISTIC"] == "true" and variables["MYCORP_TUNING"] == "7"
    assert variables["HF_TOKEN"] == "<redacted>" and variables["NCCL_PASSWORD"] == "<redacted>"
    assert "UNRELATED_VAR" not in variables
    assert "hf_abcdef" not in json.dumps(variables)
    rows = env.compare({"variables": variables}, {"variables": variables})
    assert all(r.passed for r in rows)


def test_pip_versions_compare_as_versions():
    bench = {"packages": {"torch": "2.1", "numpy": "1.26.4", "mylib": "1"}, "compared": ["torch", "numpy"]}
    target = {"packages": {"torch": "2.1.0", "numpy": "2.0.0", "mylib": "2"}, "compared": ["torch", "numpy"]}
    rows = {r.item: r.passed for r in packages.compare(bench, target)}
    assert rows == {"torch": True, "numpy": False}


def test_pip_collect_sees_installed_distributions():
    data = packages.collect(CheckContext(options={"packages": ["PyYAML"]}))
    assert data["packages"]["numpy"] and "pyyaml" in data["compared"] and "torch" in data["compared"]


def test_plugin_module_does_not_import_torch():
    code = ("import sys; from probe_config_check import plugin; "
            "assert [s.name for s in plugin.probe_checkers()] == "
            "['env','pip','hyperparameters','weights','dataset','random']; "
            "from probe_config_check import ConfigChecker; "
            "import probe_config_check.command, probe_config_check.ckpt; "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_config_json_options_reach_the_checkers(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "config_check": {"env_prefixes": ["MYCORP_"]}}))
    done = run_probe("check", "collect", "-o", tmp_path / "p.zip", "-c", config, env={"MYCORP_MODE": "fast"})
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / "p.zip") as archive:
        assert json.loads(archive.read("rank0/env.json"))["variables"]["MYCORP_MODE"] == "fast"
        assert "rank0/hyperparameters.json" not in archive.namelist()  # no -d: nothing to parse
