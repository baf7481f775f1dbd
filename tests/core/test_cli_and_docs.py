"""The probe CLI shell, and the plugin docs staying in step with the hookspecs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from probe_core import __version__, hookspecs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_version_and_help(run_probe):
    done = run_probe("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"probe {__version__}"
    done = run_probe("--help")
    assert done.returncode == 0
    assert "plugins" in done.stdout and "--debug" in done.stdout
    done = run_probe()
    assert done.returncode == 0 and "usage: probe" in done.stdout


def test_unknown_command_is_a_usage_error(run_probe):
    done = run_probe("frobnicate")
    assert done.returncode == 2
    assert "invalid choice: 'frobnicate'" in done.stderr


def test_plugin_command_and_config_section_from_a_third_party(plugin_site, run_probe, tmp_path):
    done = run_probe("hello", "--help", site=plugin_site)
    assert done.returncode == 0 and "--who" in done.stdout
    config = tmp_path / "config.json"
    config.write_text('{"hello": {"greeting": 3}}')
    done = run_probe("plugins", "-c", str(config), site=plugin_site)
    assert done.returncode == 2
    assert 'key "hello.greeting": expected a string, got 3 (number)' in done.stderr


def _hook_names() -> list[str]:
    return [name for name, obj in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("probe_")]


def test_every_hookspec_is_documented_in_code_and_in_docs():
    text = DOCS.read_text()
    headings = set(re.findall(r"^## `(probe_\w+)`", text, flags=re.M))
    for name in _hook_names():
        assert inspect.getdoc(getattr(hookspecs, name)), f"{name} has no docstring"
        assert name in headings, f"docs/plugins.md has no section for hook {name}"
    assert headings <= set(_hook_names()), f"docs/plugins.md documents unknown hooks: {headings - set(_hook_names())}"
