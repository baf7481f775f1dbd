"""A command from outside: tests/plugins/packages/probe-test-command (plugin ``hello``) adds ``probe hello NAME``."""

from __future__ import annotations

import json
import re

from tests.config_check.conftest import run_probe
from tests.plugins.conftest import write_config


def test_hello_is_listed_run_and_attributed(plugin_site):
    done = run_probe("--help", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\s+hello\s+greet someone", done.stdout, flags=re.M), done.stdout
    done = run_probe("hello", "x", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hello x (from a registry of ")
    done = run_probe("hello", "x", "--shout", pythonpath=[plugin_site])
    assert done.stdout.startswith("HELLO X")
    done = run_probe("plugins", "--json", pythonpath=[plugin_site])
    row = {row["name"]: row for row in json.loads(done.stdout)}["hello"]
    assert row["distribution"] == "probe-test-command" and row["version"] == "0.1.0"
    assert row["status"] == "enabled" and row["hooks"] == ["probe_commands"]
    assert row["provides"] == {"commands": ["hello"]}


def test_hello_takes_a_config_and_goes_when_disabled(plugin_site, tmp_path):
    config = write_config(tmp_path / "cfg.json", {"plugins": {"disable": ["hello"]}})
    done = run_probe("hello", "x", "-c", tmp_path / "empty.json", pythonpath=[plugin_site])
    assert done.returncode == 2 and "empty.json" in done.stderr  # -c was read (the file does not exist)
    done = run_probe("hello", "x", "-c", config, pythonpath=[plugin_site])
    assert done.returncode == 2 and "invalid choice: 'hello'" in done.stderr
    listed = run_probe("--help", "-c", config, pythonpath=[plugin_site]).stdout
    assert "plugins" in listed and not re.search(r"^\s+hello\s", listed, flags=re.M)
