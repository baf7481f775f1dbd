"""Issue 11, item 6: no secret reaches a pack — credentials inside URLs in env vars, script arguments and
YAML values, and values under every secret-like name. The real ``probe check collect``; the zip's bytes
are searched."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.config_check.conftest import run_probe

SECRET = "hunter2-s3cr3t"


def _pack(tmp_path, env: dict[str, str] | None = None, files: dict[str, str] | None = None) -> dict:
    paths = []
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    args = ["check", "collect", "-o", tmp_path / "pack.zip"] + (["-d", *paths] if paths else [])
    result = run_probe(*args, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    raw = (tmp_path / "pack.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "pack.zip") as archive:
        for name in archive.namelist():
            assert SECRET.encode() not in archive.read(name), name
        members = {name: json.loads(archive.read(name)) for name in archive.namelist() if name != "pip"}  # text
    assert SECRET.encode() not in raw
    return members


def test_url_credentials_in_env_vars_are_cut_out(tmp_path):
    members = _pack(tmp_path, env={"HF_ENDPOINT": f"https://alice:{SECRET}@mirror.example/hf",
                                   "PYTORCH_SERVER": f"ftp://{SECRET}@files.example/x"})
    variables = members["rank0/env.json"]["variables"]
    assert variables["HF_ENDPOINT"] == "https://<redacted>@mirror.example/hf"
    assert variables["PYTORCH_SERVER"] == "ftp://<redacted>@files.example/x"


def test_url_credentials_and_secret_query_values_in_script_arguments(tmp_path):
    script = (f"python train.py --lr 1e-4 --data-source https://bob:{SECRET}@data.example/set "
              f"--metrics-sink 'https://metrics.example/push?run=7&token={SECRET}'\n")
    members = _pack(tmp_path, files={"train.sh": script})
    params = members["rank0/hyperparameters.json"]["parameters"]
    assert params["data_source"]["value"] == "https://<redacted>@data.example/set"
    assert params["metrics_sink"]["value"] == "https://metrics.example/push?run=7&token=<redacted>"
    assert params["learning_rate"]["value"] == 0.0001


def test_url_credentials_in_yaml_values(tmp_path):
    yaml_text = (f"data:\n  url: s3://key:{SECRET}@bucket/x\n  mirrors:\n    - https://u:{SECRET}@m1.example\n"
                 "train:\n  lr: 0.001\n")
    members = _pack(tmp_path, files={"config.yaml": yaml_text})
    params = members["rank0/hyperparameters.json"]["parameters"]
    assert params["data.mirrors"]["value"] == ["https://<redacted>@m1.example"]
    assert params["learning_rate"]["value"] == 0.001


@pytest.mark.parametrize("name", ["HF_TOKEN", "HF_HUB_TKN", "NCCL_TOK", "ACCELERATE_CRED", "TORCH_SECRET",
                                  "MEGATRON_PASSWD", "MS_PWD", "DS_API_KEY", "HCCL_AUTH", "CUDA_COOKIE",
                                  "TORCH_SESSION", "HF_HUBTOKEN", "ASCEND_ACCESS_KEY_ID"])
def test_secret_names_in_env_vars(tmp_path, name):
    members = _pack(tmp_path, env={name: SECRET, "TOKENIZERS_PARALLELISM": "false"})
    variables = members["rank0/env.json"]["variables"]
    assert variables[name] == "<redacted>"
    assert variables["TOKENIZERS_PARALLELISM"] == "false"  # a look-alike stays compared


@pytest.mark.parametrize("flag", ["--hf-token", "--api-tkn", "--hub-tok", "--db-cred", "--client-secret",
                                  "--passwd", "--ssh-pwd", "--api-key", "--auth", "--cookie", "--session",
                                  "--apiKey"])
def test_secret_names_in_script_arguments(tmp_path, flag):
    members = _pack(tmp_path, files={"train.sh": f"python train.py {flag} {SECRET} --num-key-value-heads 8 "
                                                 "--pad-token-id 0\n"})
    params = members["rank0/hyperparameters.json"]["parameters"]
    assert "<redacted>" in [p["value"] for p in params.values()]
    assert params["num_key_value_heads"]["value"] == 8 and params["pad_token_id"]["value"] == 0


def test_secret_names_in_yaml_keys(tmp_path):
    yaml_text = f"logging:\n  wandb:\n    api_key: {SECRET}\n  hub_token: {SECRET}\nmodel:\n  num_key_value_heads: 8\n"
    members = _pack(tmp_path, files={"config.yaml": yaml_text})
    params = members["rank0/hyperparameters.json"]["parameters"]
    assert params["model.num_key_value_heads"]["value"] == 8


def test_secret_flags_inside_recorded_command_lines(tmp_path):
    """Issue 32, item 2: a command line recorded as a value (an env var, a launcher argument, a YAML string)
    keeps its flags but not the values of secret-named ones: ``--mytok V``, ``--api-key=V``, ``--password 'V'``."""
    script = (f"python train.py --mytok {SECRET} --lr 1e-4 "
              f"--launcher 'torchrun --password {SECRET} --nproc 8 train.py'\n")
    yaml_text = f'job:\n  cmd: "python t.py --hf-token={SECRET} --pad-token-id 0"\n'
    members = _pack(tmp_path, env={"TORCH_LAUNCH_ARGS": f"--api-key={SECRET} --db-pwd '{SECRET} x' --seed 3"},
                    files={"train.sh": script, "config.yaml": yaml_text})
    params = members["rank0/hyperparameters.json"]["parameters"]
    assert params["mytok"]["value"] == "<redacted>"
    assert params["launcher"]["value"] == "torchrun --password <redacted> --nproc 8 train.py"
    assert params["job.cmd"]["value"] == "python t.py --hf-token=<redacted> --pad-token-id 0"
    assert members["rank0/env.json"]["variables"]["TORCH_LAUNCH_ARGS"] == (
        "--api-key=<redacted> --db-pwd <redacted> --seed 3")
