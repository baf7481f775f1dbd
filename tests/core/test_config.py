"""config.json: real msprobe configs load; every bad value gets its own specific message."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from probe_core import hookimpl
from probe_core.config import load_config
from probe_core.errors import ConfigError
from probe_core.plugins import ProbeWarning, load_registry
from probe_core.specs import ConfigKey, ConfigSectionSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_configs"


@pytest.fixture(scope="module")
def registry():
    return load_registry(autoload=False)


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize("name", ["md5_mix", "stat_L0", "stat_mix", "structure_mix", "tensor_mix"])
def test_msprobe_configs_load_unchanged(name, registry):
    config, _ = load_config(FIXTURES / f"{name}.json", registry=registry)
    raw = json.loads((FIXTURES / f"{name}.json").read_text())
    assert config.task == raw["task"]
    assert config.level == raw["level"]
    assert config.dump_path == raw["dump_path"]
    assert config.rank == () and config.step == ()
    if config.task == "statistics":
        assert config.summary_mode == raw["statistics"]["summary_mode"]
        assert config.data_mode == ("all",)


def test_legacy_8x_sections_load_with_a_warning(registry):
    with pytest.warns(ProbeWarning) as caught:
        config, _ = load_config(FIXTURES / "full_legacy_8x.json", registry=registry)
    messages = " | ".join(str(w.message) for w in caught)
    for section in ("run_ut", "grad_probe", "free_benchmark"):
        assert f'section "{section}" is for a task probe does not run yet' in messages
    assert '"enable_dataloader" is deprecated' not in messages  # false there
    assert config.level == "L1"
    assert config.sections["tensor"]["file_format"] == "npy"
    assert config.sections["overflow_check"]["overflow_nums"] == 1
    assert config.sections["free_benchmark"]["fuzz_device"] == "npu"


def test_defaults_and_ranges(tmp_path, registry):
    path = _write(tmp_path, {"rank": [0, "2-4"], "step": ["1", 7]})
    config, _ = load_config(path, registry=registry)
    assert config.rank == (0, 2, 3, 4)
    assert config.step == (1, 7)
    assert config.task == "statistics" and config.level == "mix"
    assert config.summary_mode == "statistics"
    assert config.scope == () and config.list == ()


def test_overrides_reach_top_level_and_task_section(tmp_path, registry):
    path = _write(tmp_path, {"task": "tensor", "level": "L0"})
    config, _ = load_config(path, registry=registry, level="L1", dump_path="/tmp/x", list=["linear"],
                            step=None)
    assert config.level == "L1" and config.dump_path == "/tmp/x"
    assert config.list == ("linear",)
    assert config.source == str(path)
    config, _ = load_config(registry=registry, task="statistics", summary_mode="md5")
    assert config.summary_mode == "md5" and config.source == "<arguments>"


MALFORMED = [
    # (config, the text the message must hold)
    ('{"task": "statistics",', "not valid JSON at line 1, column 23"),
    ('[1, 2]', "the top level must be a JSON object {...}, not list"),
    ({"task": "statistic"}, 'key "task": "statistic" is not allowed; allowed values: "statistics", '),
    ({"level": "L3"}, 'key "level": "L3" is not allowed; allowed values: "L0", "L1", "mix", "debug"'),
    ({"async_dump": "yes"}, 'key "async_dump": expected true/false, got "yes" (string)'),
    ({"rank": "0"}, 'key "rank": expected a list, got "0" (string)'),
    ({"step": [-1]}, 'key "step": -1 is not a valid id; use non-negative integers or "a-b" ranges'),
    ({"step": ["5-2"]}, 'key "step": "5-2" is not a valid id'),
    ({"dump_path": ""}, 'key "dump_path": must be a non-empty folder path'),
    ({"dump_path": 5}, 'key "dump_path": expected a string, got 5 (number)'),
    ({"statistics": {"summary_mode": "md6"}},
     'key "statistics.summary_mode": "md6" is not allowed; allowed values: "md5", "statistics"'),
    ({"statistics": {"summery_mode": "md5"}}, 'unknown key "summery_mode" in section "statistics"; did you mean "summary_mode"?'),
    ({"taks": "statistics"}, 'unknown key "taks" at the top level; did you mean "task"?'),
    ({"statistics": {"data_mode": ["forwards"]}},
     'key "statistics.data_mode": "forwards" is not allowed; allowed values: "all", "forward", "backward", "input", "output"'),
    ({"statistics": {"scope": ["Module.a.forward.0"]}},
     'key "statistics.scope": must name 0 or 2 entries (the first and last of a range), got 1'),
    ({"overflow_check": {"overflow_nums": 0}}, 'key "overflow_check.overflow_nums": must be -1 (no limit) or a positive integer'),
    ({"tensor": {"file_format": "pt"}}, 'key "tensor.file_format": "pt" is not allowed; allowed values: "npy", "bin"'),
    ({"tensor": []}, 'key "tensor": must be an object {...} of tensor options, not list'),
    ({"plugins": ["x"]}, 'key "plugins": must be an object like {"disable": ["name"], "enable": []}, not list'),
    ({"plugins": {"disable": "x"}}, 'key "plugins.disable": must be a list of plugin names'),
    ({"plugins": {"disabled": []}}, 'unknown key "disabled" in section "plugins"; did you mean "disable"?'),
    ({"plugins": {"enable": ["nope"]}}, 'config "plugins.enable": unknown plugin \'nope\'; installed plugins: '),
    ({"level": True}, 'key "level": expected a string, got true (boolean)'),
]


@pytest.mark.parametrize("data,expected", MALFORMED, ids=[m[1][:40] for m in MALFORMED])
def test_malformed_config_gets_a_specific_message(tmp_path, data, expected):
    path = _write(tmp_path, data)
    with pytest.raises(Exception) as info:
        # tasks and summary modes come from the data-mode plugins: checked against the installed ones
        autoload = any(key in str(data) for key in ("plugins", "summary_mode", "task"))
        load_config(path, registry=None if autoload else load_registry(autoload=False))
    assert isinstance(info.value, (ConfigError,)) or type(info.value).__name__ == "PluginError"
    text = str(info.value)
    assert expected in text
    if "unknown plugin" not in expected:
        assert str(path) in text  # the message names the file


def test_all_problems_are_reported_at_once(tmp_path, registry):
    path = _write(tmp_path, {"level": "L9", "async_dump": 1, "statistics": {"list": [3]}})
    with pytest.raises(ConfigError) as info:
        load_config(path, registry=registry)
    assert len(info.value.messages) == 3
    assert any('"statistics.list": must be a list of non-empty strings' in m for m in info.value.messages)


def test_missing_file_and_folder(tmp_path, registry):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.json", registry=registry)
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path, registry=registry)


def test_plugins_contribute_config_sections(tmp_path):
    plugin = types.ModuleType("mine")
    plugin.probe_config_sections = hookimpl(lambda: [
        ConfigSectionSpec("my_checker", (ConfigKey("threshold", float, 0.5),
                                         ConfigKey("mode", str, "fast", choices=("fast", "slow"))))])
    registry = load_registry(extra=[("mine", plugin)], autoload=False)
    config, _ = load_config(_write(tmp_path, {"my_checker": {"threshold": 0.1}}), registry=registry)
    assert config.sections["my_checker"] == {"threshold": 0.1, "mode": "fast"}
    with pytest.raises(ConfigError, match='key "my_checker.mode": "medium" is not allowed; allowed values: "fast", "slow"'):
        load_config(_write(tmp_path, {"my_checker": {"mode": "medium"}}), registry=registry)


def test_one_registry_per_process_for_cli_and_load_config(tmp_path, monkeypatch, capsys):
    from probe_core import plugins
    from probe_core.cli import main
    from probe_core.plugins import PluginSelection, current_registry

    monkeypatch.delenv("PROBE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    shared = current_registry()
    disabling = current_registry(PluginSelection(disable=("parallel_merge",)))
    assert disabling is not shared and current_registry(PluginSelection()) is shared

    def no_second_build(*args, **kwargs):
        raise AssertionError("a second registry was built in this process")

    monkeypatch.setattr(plugins, "load_registry", no_second_build)
    assert main(["plugins", "--json"]) == 0
    assert {row["name"] for row in json.loads(capsys.readouterr().out)} == {p.name for p in shared.plugins}
    assert load_config(_write(tmp_path, {"task": "statistics"}))[1] is shared
    path = _write(tmp_path, {"plugins": {"disable": ["parallel_merge"]}})
    assert load_config(path)[1] is disabling
    assert main(["plugins", "--json", "-c", str(path)]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["parallel_merge"]["status"] == "disabled"


def test_cli_reports_config_errors_as_one_red_line(tmp_path, run_probe):
    path = _write(tmp_path, '{"plugins": {"disable": [1]}}')
    done = run_probe("plugins", "-c", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ")
    assert 'key "plugins.disable": must be a list of plugin names' in done.stderr
    assert "Traceback" not in done.stderr
    debug = run_probe("--debug", "plugins", "-c", str(path))
    assert debug.returncode != 0 and "Traceback" in debug.stderr
