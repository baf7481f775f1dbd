"""msprobe's own test-suite config (``test/msprobe_test/resources/config.json`` of Ascend/msprobe) loads: every key
msprobe accepts is a key of probe's; those without effect in probe warn, naming the key, when set to anything
but their default."""

from __future__ import annotations

import json
import warnings

import pytest

from probe_core.config import load_config
from probe_core.errors import ConfigError
from probe_core.plugins import ProbeWarning

#: The keys and values of msprobe's test-suite config.json (its repository, test/msprobe_test/resources/).
MSPROBE_TEST_CONFIG = {
    "task": "statistics", "dump_path": "./dump_path", "rank": [], "step": [], "level": "L1", "seed": 1234,
    "is_deterministic": False, "enable_dataloader": False, "acl_config": "",
    "tensor": {"scope": [], "list": [], "data_mode": ["all"], "backward_input": [], "file_format": "npy"},
    "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
    "overflow_check": {"overflow_nums": 1, "check_mode": "all"},
    "run_ut": {"white_list": [], "black_list": [], "error_data_path": "./"},
    "grad_probe": {"grad_level": "L1", "param_list": [], "bounds": [-1, 0, 1]},
    "free_benchmark": {"scope": [], "list": [], "fuzz_device": "npu", "pert_mode": "improve_precision",
                       "handler_type": "check", "fuzz_level": "L1", "fuzz_stage": "forward", "if_preheat": False,
                       "preheat_step": 15, "max_sample": 20},
}


def _load(tmp_path, config: dict) -> tuple[object, list[str]]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded, _ = load_config(path)
    return loaded, [str(w.message).removeprefix(f"{path}: ") for w in caught if w.category is ProbeWarning]


def test_msprobes_test_suite_config_loads(tmp_path):
    config, said = _load(tmp_path, MSPROBE_TEST_CONFIG)
    assert (config.task, config.level) == ("statistics", "L1")
    assert config.sections["tensor"]["backward_input"] == []
    # its default-valued keys need no word; the three tasks probe does not run get one each
    assert said == [f'section "{name}" is for a task probe does not run yet; it is kept but not used'
                    for name in ("run_ut", "grad_probe", "free_benchmark")]


def test_keys_without_effect_warn_naming_the_key_when_set(tmp_path):
    config = dict(MSPROBE_TEST_CONFIG, seed=7, task="tensor",
                  tensor={"backward_input": ["Functional.conv2d.0.backward.input.0.pt"], "online_run_ut": True},
                  overflow_check={"check_mode": "aicore"})
    for section in ("run_ut", "grad_probe", "free_benchmark"):
        config.pop(section)
    _, said = _load(tmp_path, config)
    keys = [line.split('"')[1] for line in said]
    assert keys == ["seed", "tensor.backward_input", "tensor.online_run_ut", "overflow_check.check_mode"]
    assert all("has no effect in probe: " in line for line in said)


def test_a_misspelt_msprobe_key_is_still_an_error_with_a_guess(tmp_path):
    with pytest.raises(ConfigError, match=r'unknown key "backward_inputs" in section "tensor"; did you mean '
                                          r'"backward_input"\?'):
        _load(tmp_path, {"task": "tensor", "tensor": {"backward_inputs": []}})
