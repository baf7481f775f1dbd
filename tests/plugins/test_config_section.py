"""A config section from outside: tests/plugins/packages/probe-test-config-section (plugin ``sampling``).

The section ``sampling`` has ``strategy`` (choices) and ``rate`` (a ``check``); config.json is
validated against it by every command that reads the file (``probe plugins -c`` here).
"""

from __future__ import annotations

import pytest

from tests.config_check.conftest import run_probe
from tests.plugins.conftest import error_lines, write_config


def test_a_valid_section_is_accepted(plugin_site, tmp_path):
    config = write_config(tmp_path / "cfg.json", {"task": "statistics", "sampling": {"strategy": "random",
                                                                                     "rate": 0.25}})
    done = run_probe("plugins", "-c", config, pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    assert "sampling" in done.stdout


@pytest.mark.parametrize("value, expected", [
    ({"strategy": "zigzag"}, 'key "sampling.strategy": "zigzag" is not allowed; allowed values: "uniform", "random"'),
    ({"rate": 3}, 'key "sampling.rate": 3 is outside (0, 1]'),
    ({"rate": "half"}, 'key "sampling.rate": expected an integer or a number, got "half"'),
    ({"strategyy": "random"}, 'unknown key "strategyy" in section "sampling"; did you mean "strategy"?'),
])
def test_a_bad_value_is_one_line_naming_file_key_and_allowed(plugin_site, tmp_path, value, expected):
    config = write_config(tmp_path / "cfg.json", {"sampling": value})
    done = run_probe("plugins", "-c", config, pythonpath=[plugin_site])
    assert done.returncode == 2, done.stdout
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {config}: ") and expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr


def test_without_the_plugin_the_section_is_unknown(tmp_path):
    config = write_config(tmp_path / "cfg.json", {"sampling": {"strategy": "random"}})
    done = run_probe("plugins", "-c", config)
    assert done.returncode == 2 and 'unknown key "sampling" at the top level' in done.stderr
